"""Stub (ours): torchtitan.components.data."""
