"""Stub (ours) of megatron.core.mpu (parallel state), single process: TP rank 0, the
first and last pipeline stage, one data-parallel rank. Tests may set ``DP_RANK`` /
``DP_SIZE`` / ``TP_RANK`` to play another rank of a larger job."""
TP_RANK = 0
DP_RANK = 0
DP_SIZE = 1


def get_tensor_model_parallel_rank() -> int:
    return TP_RANK


def is_pipeline_first_stage(ignore_virtual: bool = False) -> bool:
    return True


def is_pipeline_last_stage(ignore_virtual: bool = False) -> bool:
    return True


def get_data_parallel_world_size() -> int:
    return DP_SIZE


def get_data_parallel_rank() -> int:
    return DP_RANK
