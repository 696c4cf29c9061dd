"""Upstream's ``zephon.core`` package: only ``zephon.core.constants`` (the types
iteration yields) is provided here."""
