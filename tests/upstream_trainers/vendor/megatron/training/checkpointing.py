"""Stub (ours) of megatron.training.checkpointing: the per-rank dataloader state file of an
iteration (the layout is ours; the loader only needs save and load to agree)."""
import os


def get_dataloader_checkpoint_name(checkpoints_path: str, iteration: int, rank: int) -> str:
    return os.path.join(checkpoints_path, f"iter_{iteration:07d}",
                        f"dataloader_rank_{rank:05d}.pt")
