"""The engine through the daemon: JSONL (plain/gz/zst), mixtures with every shuffle,
max_repeats, parallel materialization identical to inline, explain."""
from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import subprocess

import numpy as np
import pytest

import zephon
from conftest import Daemon, private_dir


def write_jsonl(path, docs, compress=None):
    text = "".join(json.dumps({"input_ids": [int(t) for t in d], "meta": {"s": "x\"y"}}) + "\n"
                   for d in docs)
    if compress == "gz":
        with gzip.open(path, "wt") as f:
            f.write(text)
    elif compress == "zst":
        raw = path.with_suffix("")
        raw.write_text(text)
        subprocess.run(["zstd", "-q", "-f", str(raw), "-o", str(path)], check=True)
        raw.unlink()
    else:
        path.write_text(text)


def stream(pipe, n):
    it = iter(pipe)
    out = []
    for _ in range(n):
        b = next(it)
        out.append((hashlib.sha256(b["tokens"].tobytes()).hexdigest(), tuple(b.ids)))
    return out


@pytest.mark.skipif(shutil.which("zstd") is None, reason="needs the zstd tool")
def test_jsonl_in_every_compression_gives_the_same_batches(daemon, tmp_path):
    docs = [np.arange(1, 30 + i % 17) + i for i in range(300)]
    results = []
    for compress, name in ((None, "d.jsonl"), ("gz", "d.jsonl.gz"), ("zst", "d.jsonl.zst")):
        folder = tmp_path / (compress or "plain")
        folder.mkdir()
        write_jsonl(folder / name, docs, compress)
        ds = zephon.Dataset.from_path("j", str(folder), fmt="jsonl")
        pipe = (zephon.Pipeline(zephon.StaticMixtureWorkSource([ds], seed=3, chunk_size=50))
                .pack_flat(max_length=33).batch(2)
                .options(daemon=daemon.socket, run_id=f"jsonl-{compress}"))
        results.append(stream(pipe, 10))
        pipe.close()
    assert results[0] == results[1] == results[2]


def test_corrupt_jsonl_names_file_and_line(daemon, tmp_path):
    (tmp_path / "bad.jsonl").write_text('{"input_ids": [1, 2, 3]}\n{"input_ids": [4, "x"]}\n')
    ds = zephon.Dataset.from_path("bad", str(tmp_path / "bad.jsonl"), fmt="jsonl")
    pipe = (zephon.Pipeline(zephon.StaticMixtureWorkSource([ds])).pack_flat(max_length=3)
            .batch(1).options(daemon=daemon.socket))
    with pytest.raises(zephon.ZephonError, match=r"bad\.jsonl.*line 2"):
        pipe.attach()


def mixture(corpus_a, corpus_b, socket, threads, **options):
    a = zephon.Dataset.from_path("a", str(corpus_a), fmt="megatron")
    b = zephon.Dataset.from_path("b", str(corpus_b), fmt="megatron")
    ws = zephon.StaticMixtureWorkSource([a, b], mixture={"a": 3, "b": 1}, seed=9, chunk_size=40,
                                        shuffle_within_shard=True, shuffle_block_size=64,
                                        exhausted_policy="repeat")
    return (zephon.Pipeline(ws).shuffle(buffer_size=32, seed=4).pack_flat(max_length=65)
            .batch(2).options(daemon=socket, num_threads=threads, **options))


@pytest.fixture
def two_corpora(tmp_path):
    from zephon.corpus import synthetic_documents
    paths = []
    for name, seed in (("a", 1), ("b", 2)):
        folder = tmp_path / name
        folder.mkdir()
        docs = synthetic_documents(400, seed=seed, min_len=5, max_len=120)
        zephon.write_megatron_dataset(folder / "s0", docs[:200])
        zephon.write_megatron_dataset(folder / "s1", docs[200:])
        paths.append(folder)
    return paths


def test_parallel_materialization_matches_inline_through_the_daemon(two_corpora, tmp_path):
    inline = Daemon(private_dir(tmp_path / "inline"), extra_args=["--worker-threads", "0"])
    pooled = Daemon(private_dir(tmp_path / "pool"), extra_args=["--worker-threads", "4"])
    a = mixture(*two_corpora, inline.socket, threads=1)
    b = mixture(*two_corpora, pooled.socket, threads=4)
    assert stream(a, 60) == stream(b, 60)
    text = b.explain()
    assert "materialize: parallelism=4" in text and "worker_threads=4" in text
    # Both datasets contribute, in roughly the 3:1 mixture.
    counts = {0: 0, 1: 0}
    for _, ids in stream(a, 40):
        for i in ids:
            counts[i.dataset] += 1
    assert counts[0] > 2 * counts[1] > 0
    a.close()
    b.close()
    assert inline.stop() == 0 and pooled.stop() == 0


def test_max_repeats_ends_a_repeating_stream(daemon, tmp_path):
    docs = [np.full(8, i + 1) for i in range(40)]
    zephon.write_megatron_dataset(tmp_path / "tiny", docs)
    ds = zephon.Dataset.from_path("tiny", str(tmp_path / "tiny"), fmt="megatron")
    ws = zephon.StaticMixtureWorkSource([ds], chunk_size=10, exhausted_policy="repeat",
                                        max_repeats=1)
    pipe = zephon.Pipeline(ws).pack_flat(max_length=16).batch(1).options(daemon=daemon.socket)
    seen = [i for b in pipe for i in b.ids]
    # Two passes over 40 documents: each appears exactly twice.
    assert len(seen) == 80 and set(np.unique([s.index for s in seen])) == set(range(40))
    pipe.close()


def test_explain_shows_stages_and_node_totals(daemon, two_corpora):
    pipe = mixture(*two_corpora, daemon.socket, threads=1)
    next(iter(pipe))
    text = pipe.explain()
    for needle in ("instance ", "lanes", "shuffle", "pack_flat", "batch", "materialize",
                   "ring", "node totals", "ring_bytes="):
        assert needle in text, needle
    pipe.close()
