"""Stub of the ``megatron`` package for tests/upstream_trainers (ours, not upstream).

Only ``megatron.training.datasets.zephon_dataloader`` is real (copied unchanged from
datologyai/Megatron-LM-zephon); every other module is a minimal stand-in for what that
file imports, documented at its definition."""
