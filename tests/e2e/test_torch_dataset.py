"""Pipeline.to_torch_dataset (issue 18): a torch IterableDataset for
DataLoader(batch_size=None, num_workers=0) whose state_dict()/load_state_dict() a
checkpointer saves with the model (here as TorchTitan's does: every rank's states dict
through torch.save, then loaded into the restarted job's fresh objects)."""
from __future__ import annotations

import io
import threading

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset

import zephon
from zephon import errors


def make(corpus, socket, rank, agg, world=2):
    ds = zephon.Dataset.from_path("web", str(corpus), fmt="megatron")
    ws = zephon.StaticMixtureWorkSource([ds], seed=5, chunk_size=16)
    return (zephon.Pipeline(ws).pack_flat(max_length=33).batch(2)
            .options(daemon=socket, world_size=world, global_rank=rank, dp_degree=world,
                     dp_group_id=rank, canonical_replicas=2, run_id="torchds",
                     aggregate_dir=str(agg)))


def to_step(batch):
    return batch.to_training(return_labels=True, as_torch=True)


def test_a_checkpointer_saves_and_restores_the_data_state_with_the_model(corpus, daemon,
                                                                         tmp_path):
    agg = tmp_path / "agg"
    datasets = [make(corpus, daemon.socket, r, agg).to_torch_dataset(transform=to_step)
                for r in range(2)]
    assert all(isinstance(d, IterableDataset) for d in datasets)
    loaders = [iter(DataLoader(d, batch_size=None, num_workers=0)) for d in datasets]
    seen = [[], []]
    saved = [None, None]

    def rank(r):
        for step in range(6):
            out = next(loaders[r])
            assert out["input_ids"].dtype == torch.long and out["input_ids"].shape == (2, 32)
            seen[r].append(out["input_ids"].clone())
            if step == 2:  # the checkpointer: states = {"model": ..., "dataloader": ds}
                buf = io.BytesIO()
                torch.save({"model": {"w": torch.zeros(2)}, "dataloader":
                            datasets[r].state_dict()}, buf)
                saved[r] = buf.getvalue()

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert all(s is not None for s in saved)
    for d in datasets:
        d.pipeline.close()

    # The restarted job: fresh objects, the saved states loaded, the stream goes on.
    restarted = [make(corpus, daemon.socket, r, agg).to_torch_dataset(transform=to_step)
                 for r in range(2)]
    for r, d in enumerate(restarted):
        states = torch.load(io.BytesIO(saved[r]))
        d.load_state_dict(states["dataloader"])
    for r, d in enumerate(restarted):
        loader = iter(DataLoader(d, batch_size=None, num_workers=0))
        for step in range(3, 6):
            assert torch.equal(next(loader)["input_ids"], seen[r][step]), (r, step)
        d.pipeline.close()


def test_misuse_is_refused_naming_the_fix(corpus, daemon, tmp_path):
    d = make(corpus, daemon.socket, 0, tmp_path / "agg", world=1).to_torch_dataset()
    with pytest.raises(errors.InvalidOptionError, match="with key 'zephon_checkpoint'"):
        d.load_state_dict({"dp_rank_0": b""})
    with pytest.raises(RuntimeError, match="num_workers=0"):
        next(iter(DataLoader(d, batch_size=None, num_workers=1)))
    batch = next(iter(DataLoader(d, batch_size=None, num_workers=0)))
    assert isinstance(batch, zephon.Batch) and batch["tokens"].shape == (2, 33)
    d.pipeline.close()


def test_readme_torch_example_runs(tmp_path):
    from readme_blocks import run_readme_block
    out = run_readme_block("to_torch_dataset(transform=", tmp_path)
    assert "resumed equal: True" in out
