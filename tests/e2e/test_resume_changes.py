"""Elastic resume with what users change (issue 16): another microbatch_size on another
dp_degree, a changed flush_every_k_chunks at a flush-group boundary, and refusals that
name the field. Real zephond processes; ranks are Pipeline objects driven from threads."""
from __future__ import annotations

import hashlib
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import zephon

C = 4  # lanes
MAX_LENGTH = 33


@pytest.fixture(scope="module")
def docs_corpus(tmp_path_factory):
    from zephon.corpus import synthetic_documents
    root = tmp_path_factory.mktemp("resume-changes")
    zephon.write_megatron_dataset(root / "a",
                                  synthetic_documents(800, seed=3, min_len=10, max_len=120))
    return root


def rows(batch) -> list[str]:
    tokens = batch["tokens"]
    return [hashlib.sha256(r.tobytes()).hexdigest()[:16] for r in tokens]


def make_pipe(corpus, socket, agg, *, microbatch, dp=1, group=0, restore=None, run_id="mb",
              **extra):
    ds = zephon.Dataset.from_path("web", str(corpus), fmt="megatron")
    ws = zephon.StaticMixtureWorkSource([ds], seed=7, chunk_size=8, shuffle_within_shard=True,
                                        exhausted_policy="repeat")
    pipe = (zephon.Pipeline(ws).shuffle(buffer_size=8, seed=3).pack_flat(max_length=MAX_LENGTH)
            .batch(microbatch)
            .options(daemon=socket, world_size=dp, global_rank=group, dp_degree=dp,
                     dp_group_id=group, run_id=run_id, aggregate_dir=str(agg),
                     canonical_replicas=C, **extra))
    return pipe.restore(restore) if restore is not None else pipe


def read_steps(pipes, steps) -> list[Counter]:
    """`steps` steps of C batches in total (C/dp per DP group): each step's rows."""
    its = [iter(p) for p in pipes]
    out = []
    for _ in range(steps):
        step = Counter()
        for it in its:
            for _ in range(C // len(pipes)):
                step.update(rows(next(it)))
        out.append(step)
    return out


def checkpoint_all(pipes) -> bytes:
    with ThreadPoolExecutor(len(pipes)) as pool:
        states = list(pool.map(lambda p: p.checkpoint(), pipes))
    assert all(s == states[0] for s in states)
    return states[0]


def test_checkpoint_with_microbatch_4_resumes_with_2_on_another_dp_degree(docs_corpus, daemon,
                                                                          tmp_path):
    agg = tmp_path / "agg"
    # The uninterrupted run with microbatch_size 2.
    ref = make_pipe(docs_corpus, daemon.socket, agg, microbatch=2, run_id="ref")
    want = read_steps([ref], 8)
    ref.close()

    # Two steps of microbatch_size 4 on dp_degree 2: every lane took 8 records, which
    # are the first four steps of the microbatch-2 run.
    first = [make_pipe(docs_corpus, daemon.socket, agg, microbatch=4, dp=2, group=g)
             for g in range(2)]
    before = read_steps(first, 2)
    assert sum(before, Counter()) == sum(want[:4], Counter())
    state = checkpoint_all(first)
    for p in first:
        p.close()

    # Resumed with microbatch_size 2 on dp_degree 4: the steps continue the reference's.
    resumed = [make_pipe(docs_corpus, daemon.socket, agg, microbatch=2, dp=4, group=g,
                         restore=state) for g in range(4)]
    assert read_steps(resumed, 2) == want[4:6]
    # Checkpointed again with size 2 and resumed with 4 on one rank: each lane took 2
    # more records, then 4 per batch again (reference steps 6-7 are one step of 4).
    again = checkpoint_all(resumed)
    for p in resumed:
        p.close()
    assert zephon.inspect_checkpoint(again)["round"] == 1
    back = make_pipe(docs_corpus, daemon.socket, agg, microbatch=4, restore=again)
    assert read_steps([back], 1) == [want[6] + want[7]]
    back.close()

    # A field that defines the data is still refused, naming it and both values.
    ds = zephon.Dataset.from_path("web", str(docs_corpus), fmt="megatron")
    other = (zephon.Pipeline(zephon.StaticMixtureWorkSource(
                 [ds], seed=8, chunk_size=8, shuffle_within_shard=True,
                 exhausted_policy="repeat"))
             .shuffle(buffer_size=8, seed=3).pack_flat(max_length=MAX_LENGTH).batch(2)
             .options(daemon=daemon.socket, world_size=4, global_rank=0, dp_degree=4,
                      dp_group_id=0, run_id="mb", aggregate_dir=str(agg),
                      canonical_replicas=C)
             .restore(state))
    with pytest.raises(zephon.ZephonError,
                       match=r"spec hash .*work_source\.seed: 7 in the checkpoint, 8 now"):
        other.attach()
    other.close()


def tiny_pipe(corpus, socket, *, k, microbatch=4, restore=None):
    ds = zephon.Dataset.from_path("tiny", str(corpus), fmt="megatron")
    ws = zephon.StaticMixtureWorkSource([ds], chunk_size=4)
    p = (zephon.Pipeline(ws).pack_flat(max_length=16).batch(microbatch)
         .options(daemon=socket, canonical_replicas=2, flush_every_k_chunks=k))
    return p.restore(restore) if restore is not None else p


def all_rows(pipe) -> list[str]:
    return [r for b in pipe for r in rows(b)]


def test_changed_flush_every_k_is_accepted_at_a_group_boundary_and_refused_mid_group(
        daemon, tmp_path):
    # 64 documents of 16 tokens, records of 16: one document per record. Lanes of 8
    # chunks of 4; flush_every_k_chunks=2 makes groups of 8 records, 2 batches of 4.
    zephon.write_megatron_dataset(tmp_path / "tiny",
                                  [np.arange(16) + 100 * i for i in range(64)])
    corpus = tmp_path / "tiny"
    original = tiny_pipe(corpus, daemon.socket, k=2)
    it = iter(original)
    head = [r for _ in range(2) for r in rows(next(it))]  # one batch per lane
    mid_group = original.checkpoint()
    head += [r for _ in range(2) for r in rows(next(it))]  # each lane finished group 0
    at_boundary = original.checkpoint()
    tail = [r for b in it for r in rows(b)]
    original.close()
    assert len(head) + len(tail) == 64

    refused = tiny_pipe(corpus, daemon.socket, k=1, restore=mid_group)
    with pytest.raises(zephon.ZephonError,
                       match=r"flush_every_k_chunks changed from 2 to 1, but lane 0 stands "
                             r"4 records into its flush group at lane chunk 0"):
        refused.attach()
    refused.close()

    # At the boundary (lane chunk 2): k=1 and another microbatch_size are accepted, and
    # every record after the checkpoint comes exactly once.
    resumed = tiny_pipe(corpus, daemon.socket, k=1, restore=at_boundary)
    assert all_rows(resumed) == tail
    resumed.close()
    resumed = tiny_pipe(corpus, daemon.socket, k=1, microbatch=2, restore=at_boundary)
    assert Counter(all_rows(resumed)) == Counter(tail)
    resumed.close()

    # Lane chunk 2 is not a boundary of flush_every_k_chunks=4.
    refused = tiny_pipe(corpus, daemon.socket, k=4, restore=at_boundary)
    with pytest.raises(zephon.ZephonError,
                       match=r"lane 0 stands at lane chunk 2, a flush-group boundary of 2 "
                             r"but not of 4"):
        refused.attach()
    refused.close()


@pytest.mark.parametrize("marker", ["resumed with microbatch_size 2", "documents per row:"])
def test_readme_examples_run(tmp_path, marker):
    """The README's examples of this feature run as written (autostarting zephond)."""
    from readme_blocks import run_readme_block

    assert marker in run_readme_block(marker, tmp_path)