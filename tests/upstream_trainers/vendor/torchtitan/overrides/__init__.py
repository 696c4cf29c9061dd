"""Stub package (ours) holding the vendored, unchanged zephon_dataloader.py."""
