"""Checkpoint and restore messages past gRPC's default 4 MiB limit, through real daemons:
the merged checkpoint carries the spec and one entry per rank and lane, so large worlds
(about 60,000 ranks) exceed 4 MiB. Cheaply simulated here with a 5 MiB dataset name in
the spec, which every attach, report, checkpoint and restore message carries."""
from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import zephon
from zephon.corpus import synthetic_documents
from zephond_process import Daemon

BIG_NAME = "n" * (5 << 20)


@pytest.fixture
def corpus(tmp_path) -> Path:
    root = tmp_path / "corpus"
    root.mkdir()
    zephon.write_megatron_dataset(root / "a", synthetic_documents(300, seed=3, min_len=10,
                                                                  max_len=160))
    return root


def make_pipe(corpus, socket, *, rank, agg, restore=None):
    ds = zephon.Dataset.from_path(BIG_NAME, str(corpus), fmt="megatron")
    ws = zephon.StaticMixtureWorkSource([ds], seed=5, chunk_size=16,
                                        exhausted_policy="repeat")
    pipe = (zephon.Pipeline(ws).pack_flat(max_length=33).batch(2)
            .options(daemon=socket, world_size=2, global_rank=rank, dp_degree=2,
                     dp_group_id=rank, run_id="big", aggregate_dir=str(agg),
                     aggregate_timeout_s=60.0, canonical_replicas=2))
    if restore is not None:
        pipe.restore(restore)
    return pipe


def digests(it, n):
    return [hashlib.sha256(next(it)["tokens"].tobytes()).hexdigest()[:16] for _ in range(n)]


def test_checkpoint_and_restore_over_4_mib_across_two_daemons(corpus, tmp_path):
    daemons = [Daemon(tmp_path / f"node{i}") for i in range(2)]
    pool = ThreadPoolExecutor(max_workers=2)
    try:
        agg = tmp_path / "agg"
        pipes = [make_pipe(corpus, daemons[r].socket, rank=r, agg=agg) for r in range(2)]
        its = [iter(p) for p in pipes]
        for it in its:
            digests(it, 3)
        ckpts = list(pool.map(lambda p: p.checkpoint(), pipes))
        assert ckpts[0] == ckpts[1]
        assert len(ckpts[0]) > (5 << 20), len(ckpts[0])  # over gRPC's default 4 MiB
        expected = [digests(it, 4) for it in its]
        for p in pipes:
            p.close()

        restored = [make_pipe(corpus, daemons[r].socket, rank=r, agg=agg, restore=ckpts[0])
                    for r in range(2)]
        assert [digests(iter(p), 4) for p in restored] == expected
        # And the restored ranks checkpoint again (the next round).
        again = list(pool.map(lambda p: p.checkpoint(), restored))
        assert again[0] == again[1] and len(again[0]) > (5 << 20)
        for p in restored:
            p.close()
    finally:
        pool.shutdown()
        for d in daemons:
            assert d.stop() == 0
