"""Stub (ours) of torchtitan.components.loss: the label value the loss ignores."""
IGNORE_INDEX = -100
