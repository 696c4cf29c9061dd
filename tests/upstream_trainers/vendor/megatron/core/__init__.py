"""Stub (ours) of megatron.core: only the ``mpu`` submodule is imported."""
