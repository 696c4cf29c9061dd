"""Shared parts of the two example trainers (torchtitan_style.py, megatron_style.py):
arguments, the startup checks, the data recipe, a tiny float64 language model, the
training step, the global-batch hash and the combined checkpoint file.

Not a framework: each trainer reads top to bottom; this file only keeps the two from
drifting apart where they must agree (same recipe, same model, same hash), so a run of
one style can be compared with a run of the other.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F

import zephon


def parse_args(description: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--data", required=True,
                   help="Megatron .bin/.idx shards: a directory or an s3://bucket/prefix")
    p.add_argument("--socket", default=os.environ.get("ZEPHON_SOCKET"),
                   help="zephond socket (default: $ZEPHON_SOCKET)")
    p.add_argument("--run-id", default="example-run")
    p.add_argument("--aggregate-dir", required=True,
                   help="shared by every rank for checkpoint rounds: a directory on a "
                        "shared filesystem or an s3://bucket/prefix")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel size (peers of a DP group)")
    p.add_argument("--dp-shard", type=int, default=0,
                   help="HSDP shard size (dp = dp_replicate x dp_shard); 0: no replication")
    p.add_argument("--canonical-replicas", type=int, default=8)
    p.add_argument("--global-batches", type=int, default=8,
                   help="batches (microbatches) per optimizer step over the whole job")
    p.add_argument("--microbatch", type=int, default=2)
    p.add_argument("--seq-len", type=int, default=32, help="packed rows hold seq_len + 1 tokens")
    p.add_argument("--vocab", type=int, default=64)
    p.add_argument("--dim", type=int, default=16)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--seed", type=int, default=0, help="model initialisation seed")
    p.add_argument("--steps", type=int, required=True, help="train until this global step")
    p.add_argument("--save-at", type=int, action="append", default=[],
                   help="save model + optimizer + Zephon state after this step (repeatable)")
    p.add_argument("--save", default="checkpoint-{step}.pt",
                   help="checkpoint path; {step} is replaced by the step")
    p.add_argument("--resume", help="checkpoint file to resume from (model, optimizer, data)")
    p.add_argument("--log", help="JSON file: per-step global-batch SHA-256 and loss (rank 0)")
    return p.parse_args()


def topology(args) -> tuple[int, int, int, int]:
    """(rank, world_size, dp, tp) from the torchrun-style environment and --tp."""
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if args.tp < 1 or world % args.tp:
        fail(rank, f"WORLD_SIZE={world} is not divisible by --tp={args.tp}")
    return rank, world, world // args.tp, args.tp


def fail(rank: int, message: str) -> None:
    """Exits with status 2 and a message (printed once, by rank 0)."""
    if rank == 0:
        print(f"error: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


def check_config(rank: int, dp: int, args) -> None:
    """The two startup checks every Zephon integration makes, before any process group
    or Pipeline exists (so a bad config never hangs): lanes must split evenly over the
    DP groups, and one optimizer step must consume a whole number of lane rounds, or a
    resume on another dp would see other samples in a step."""
    C, G = args.canonical_replicas, args.global_batches
    if C % dp:
        fail(rank, f"canonical_replicas={C} is not divisible by the data-parallel size "
                   f"dp={dp}: every DP group must own the same number of lanes "
                   f"(use a dp that divides {C})")
    if G % C:
        fail(rank, f"global_batches={G} is not a multiple of canonical_replicas={C}: one "
                   "optimizer step must consume a multiple of canonical_replicas batches for "
                   "steps to hold the same samples on any number of ranks")


def make_pipeline(args) -> zephon.Pipeline:
    """The data recipe, identical on every rank (peers of a DP group must agree)."""
    ds = zephon.Dataset.from_path("web", args.data, fmt="megatron")
    ws = zephon.StaticMixtureWorkSource([ds], seed=5, chunk_size=16, shuffle_within_shard=True,
                                        exhausted_policy="repeat")
    return (zephon.Pipeline(ws).shuffle(buffer_size=16, seed=2)
            .pack_flat(max_length=args.seq_len + 1).batch(args.microbatch))


class TinyLM(torch.nn.Module):
    """Embedding + one linear layer: predicts the next token from the current one."""

    def __init__(self, vocab: int, dim: int):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.out = torch.nn.Linear(dim, vocab)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.out(self.embed(input_ids))


def build_model(args):
    """Same initial weights on every rank and every run (fixed seed), float64 so that
    loss curves of runs on different numbers of ranks compare to ~1e-12."""
    torch.set_default_dtype(torch.float64)
    torch.manual_seed(args.seed)
    model = TinyLM(args.vocab, args.dim)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    return model, optimizer


def dp_groups(world: int, tp: int):
    """One process group per TP index, holding the DP ranks with that index (rank =
    dp_rank * tp + tp_rank). Every rank must create every group, in the same order."""
    groups = [dist.new_group([d * tp + t for d in range(world // tp)]) for t in range(tp)]
    return groups


def train_step(model, optimizer, micro: list[tuple[torch.Tensor, torch.Tensor]], dp: int,
               dp_group, vocab: int, ignore_index: int = -100) -> float:
    """One optimizer step over this DP rank's microbatches (gradient accumulation), then
    all-reduce(mean) of the gradients over the DP ranks only. The loss is the mean token
    cross-entropy of the whole global batch; returns it (the same on every rank)."""
    valid = torch.tensor([sum(int((lab != ignore_index).sum()) for _, lab in micro)],
                         dtype=torch.float64)
    dist.all_reduce(valid, group=dp_group)  # tokens of the global batch
    optimizer.zero_grad(set_to_none=True)
    local = torch.zeros(1, dtype=torch.float64)
    for inputs, labels in micro:
        logits = model(inputs % vocab)
        labels = torch.where(labels == ignore_index, labels, labels % vocab)
        loss_sum = F.cross_entropy(logits.reshape(-1, vocab), labels.reshape(-1),
                                   ignore_index=ignore_index, reduction="sum")
        # Scaled so that the mean over DP ranks of the summed gradients is the gradient
        # of the global-batch mean loss.
        (loss_sum * (dp / valid)).backward()
        local += loss_sum.detach()
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad, group=dp_group)
            p.grad /= dp
    optimizer.step()
    local /= valid
    dist.all_reduce(local, group=dp_group)
    return float(local)


def record(batch: zephon.Batch) -> tuple[int, int, bytes]:
    """What the global-batch hash needs from one microbatch: its lane coordinates (a
    canonical order, the same on any dp) and its raw token bytes."""
    return (int(batch.lane), int(batch.lane_batch_index), batch["tokens"].tobytes())


def global_batch_sha256(records: list[tuple[int, int, bytes]]) -> str:
    """SHA-256 over the step's microbatch tokens sorted by (lane, lane_batch_index)."""
    h = hashlib.sha256()
    for _, _, data in sorted(records):
        h.update(data)
    return h.hexdigest()


def gather_records(mine: list, rank: int):
    """All ranks' records, at rank 0 (others get None). Uses the default group."""
    everyone: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, mine)
    return everyone if rank == 0 else None


def save_checkpoint(path: str, step: int, data_state, model, optimizer, args,
                    key: str = "zephon") -> None:
    """One file for the data state and the model + optimizer of the same step (rank 0).
    `data_state` goes under `key`: the checkpoint bytes as "zephon", or a torch dataset's
    state_dict() as "dataloader" (TorchTitan's checkpointer key)."""
    tmp = path + ".tmp"
    torch.save({"step": step, key: data_state, "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "config": {k: getattr(args, k) for k in
                           ("canonical_replicas", "global_batches", "microbatch", "seq_len",
                            "vocab", "dim", "run_id")}}, tmp)
    os.replace(tmp, path)


def load_checkpoint(path: str, model, optimizer, args):
    """(step, the data state saved: a dataset's state_dict() or the checkpoint bytes)."""
    state = torch.load(path)
    for key in ("canonical_replicas", "microbatch", "seq_len", "vocab", "dim", "run_id"):
        if state["config"][key] != getattr(args, key):
            raise SystemExit(f"error: --resume {path}: {key}={state['config'][key]!r} in the "
                             f"checkpoint but {getattr(args, key)!r} now; keep it unchanged")
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return int(state["step"]), state["dataloader"] if "dataloader" in state else state["zephon"]


class StepLog:
    """Rank 0's JSON log: per-step global-batch hash and loss, rewritten after each step."""

    def __init__(self, path: str | None, **meta):
        self.path = path
        self.data = dict(meta, steps=[])

    def add(self, step: int, sha256: str, loss: float, lanes: list) -> None:
        self.data["steps"].append({"step": step, "sha256": sha256, "loss": loss,
                                   "lanes": lanes})
        print(f"step {step}: loss {loss:.12f} batch {sha256[:16]}", flush=True)
        if self.path:
            tmp = self.path + ".tmp"
            with open(tmp, "w") as f:
                json.dump(self.data, f, indent=1)
            os.replace(tmp, self.path)
