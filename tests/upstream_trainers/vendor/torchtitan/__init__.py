"""Stub of the ``torchtitan`` package for tests/upstream_trainers (ours, not upstream).

Only ``torchtitan.overrides.zephon_dataloader`` is real (copied unchanged from
datologyai/torchtitan-zephon); every other module here is a minimal stand-in for what
that file imports, documented at its definition."""
