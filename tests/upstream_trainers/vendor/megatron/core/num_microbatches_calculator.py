"""Stub (ours) of megatron.core.num_microbatches_calculator: a settable constant."""
NUM_MICROBATCHES = 1


def get_num_microbatches() -> int:
    return NUM_MICROBATCHES
