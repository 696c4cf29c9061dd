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
    with pytest.raises(RuntimeError, match="before the Pipeline is iterated"):
        d.load_state_dict({"zephon_checkpoint": b"", "format": 1})
    d.pipeline.close()


def test_readme_torch_example_runs(tmp_path):
    from readme_blocks import run_readme_block
    out = run_readme_block("torch.save({\"dataloader\": ds.state_dict()}", tmp_path)
    assert "resumed equal: True" in out


# ----- torch.distributed.checkpoint's Stateful protocol ------------------------------
# Debian's torch 1.13 has no torch.distributed.checkpoint, so these helpers make DCP's
# calls in DCP's order (torch/distributed/checkpoint/state_dict_{saver,loader}.py):
# save: state_dict() of every Stateful on every rank, nested dicts flattened to
# "dataloader.zephon_checkpoint" keys, a non-tensor key every rank writes kept once (one
# rank's copy); load: state_dict() of the fresh objects as the template, every key of the
# template filled from storage in place, then load_state_dict(template[key]).
def _flatten(prefix, value, out):
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else k, v, out)
    else:
        out[prefix] = value


def _is_stateful(value):
    return hasattr(value, "state_dict") and hasattr(value, "load_state_dict")


def dcp_like_save(states_per_rank, path):
    flat = []
    for states in states_per_rank:
        out = {}
        for key, value in states.items():
            _flatten(key, value.state_dict() if _is_stateful(value) else value, out)
        flat.append(out)
    stored = {}
    for key in flat[0]:
        copies = [f[key] for f in flat]
        if not isinstance(copies[0], torch.Tensor):
            # DCP writes one rank's copy of a bytes item every rank has: right only if
            # they agree.
            assert all(c == copies[0] for c in copies), f"{key} differs between ranks"
        stored[key] = copies[0]
    torch.save(stored, path)


def dcp_like_load(states, path):
    stored = torch.load(path)
    templates = {k: v.state_dict() if _is_stateful(v) else v for k, v in states.items()}
    for key, template in templates.items():
        if isinstance(template, dict):
            for field in template:
                template[field] = stored[f"{key}.{field}"]
        else:
            templates[key] = stored[key]
    for key, value in states.items():
        if _is_stateful(value):
            value.load_state_dict(templates[key])
    return templates


def test_dcp_saves_and_loads_the_dataset_as_a_stateful(corpus, daemon, tmp_path):
    agg = tmp_path / "agg"
    datasets = [make(corpus, daemon.socket, r, agg).to_torch_dataset(transform=to_step)
                for r in range(2)]
    # A checkpoint before training runs no round, on a rank that attached already (as
    # explain() or attach_info do) as on one that did not: the stream's start. A round
    # would wait for the other rank (sequential here) until aggregate_timeout_s.
    assert datasets[0].pipeline.attach_info["instance_id"]
    first = []
    t = threading.Thread(target=lambda: first.append(datasets[0].state_dict()), daemon=True)
    t.start()
    t.join(timeout=30)
    assert first == [{"zephon_checkpoint": b"", "format": 1}], "state_dict() ran a round"
    dcp_like_save([{"dataloader": d} for d in datasets], tmp_path / "step-0.pt")
    assert datasets[1].pipeline._reader is None, "state_dict() attached"
    assert torch.load(tmp_path / "step-0.pt") == {"dataloader.zephon_checkpoint": b"",
                                                  "dataloader.format": 1}
    loaders = [iter(DataLoader(d, batch_size=None, num_workers=0)) for d in datasets]
    seen = [[], []]

    def steps(r, n):
        for _ in range(n):
            seen[r].append(next(loaders[r])["input_ids"].clone())

    def on_ranks(fn):
        threads = [threading.Thread(target=fn, args=(r,)) for r in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
            assert not t.is_alive(), "a rank hung"

    on_ranks(lambda r: steps(r, 3))
    per_rank = [None, None]

    def collect(r):  # DCP calls state_dict() on every rank at once: the collective round
        per_rank[r] = datasets[r].state_dict()

    on_ranks(collect)
    dcp_like_save([{"model": {"w": torch.full((2,), float(r))}, "dataloader": _Saved(s)}
                   for r, s in enumerate(per_rank)], tmp_path / "step-3.pt")
    on_ranks(lambda r: steps(r, 3))
    for d in datasets:
        d.pipeline.close()

    # The restarted job: fresh objects; the template of one not yet started is its start.
    for r in range(2):
        fresh = make(corpus, daemon.socket, r, agg).to_torch_dataset(transform=to_step)
        states = {"model": {"w": torch.zeros(2)}, "dataloader": fresh}
        loaded = dcp_like_load(states, tmp_path / "step-3.pt")
        assert fresh.pipeline._reader is None, "the template's state_dict() attached"
        assert loaded["dataloader"]["zephon_checkpoint"] == per_rank[0]["zephon_checkpoint"]
        # Saving again before the first batch keeps the restored state, not the start.
        assert fresh.state_dict()["zephon_checkpoint"] == per_rank[0]["zephon_checkpoint"]
        loader = iter(DataLoader(fresh, batch_size=None, num_workers=0))
        for step in range(3, 6):
            assert torch.equal(next(loader)["input_ids"], seen[r][step]), (r, step)
        fresh.pipeline.close()

    # The step-0 checkpoint restores nothing: the stream starts at its first batch.
    fresh = make(corpus, daemon.socket, 0, tmp_path / "agg0").to_torch_dataset(
        transform=to_step)
    dcp_like_load({"dataloader": fresh}, tmp_path / "step-0.pt")
    assert fresh.pipeline._restore is None
    fresh.pipeline.close()


class _Saved:
    """A Stateful whose state_dict() is one already taken (the round ran on every rank
    at once above; DCP would call it inside save)."""

    def __init__(self, state):
        self.state = state

    def state_dict(self):
        return self.state

    def load_state_dict(self, state):
        self.state = state


def test_readme_dcp_example_runs(tmp_path):
    try:
        import torch.distributed.checkpoint as dcp
        assert callable(dcp.save) and callable(dcp.load)
    except (ImportError, ValueError, AttributeError, AssertionError) as e:
        pytest.skip(f"torch {torch.__version__} has no torch.distributed.checkpoint save/load "
                    f"(torch >= 2.2 has): {type(e).__name__}: {e}; the Stateful protocol is "
                    "driven by test_dcp_saves_and_loads_the_dataset_as_a_stateful")
    from readme_blocks import run_readme_block
    out = run_readme_block("dcp.save(", tmp_path)
    assert "dcp resumed equal: True" in out
