"""Stub (ours): holds the data/loss/tokenizer stand-ins zephon_dataloader imports."""
