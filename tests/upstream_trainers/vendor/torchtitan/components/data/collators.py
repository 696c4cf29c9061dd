"""Stub (ours) of torchtitan.components.data.collators.

zephon_dataloader uses ``TrainerBatch`` only as the element type of ``__iter__``'s
annotation: a dict of tensors/ints is what it yields."""
from typing import Any

TrainerBatch = dict[str, Any]
