"""In-memory datasets as upstream spells them (issue 17): Dataset.from_dict(name,
{0: InMemoryShard(rows)}) is written by the client to a private JSONL directory zephond
reads, survives pickling into a spawned process, is bounded in size, and is removed with
the Dataset that made it."""
from __future__ import annotations

import gc
import multiprocessing as mp
import os
import pickle

import pytest

import zephon
from zephon import errors
from zephon.io import Dataset, InMemoryShard

from in_memory_child import decoded_documents

ROWS = [{"text": f"alpha-{i} ✓"} for i in range(12)]


def test_rows_reach_the_batches_and_a_spawned_process_reads_them_too(daemon):
    ds = Dataset.from_dict("mem", {1: InMemoryShard(ROWS[6:]), 0: InMemoryShard(ROWS[:6])})
    root = ds.path
    assert sorted(os.listdir(root)) == ["part-00000.jsonl", "part-00001.jsonl"]
    assert os.stat(root).st_mode & 0o777 == 0o700
    here = decoded_documents(ds, daemon.socket)
    # first_fit with one bin of 64: every document whole, in its own or a shared row.
    joined = "".join(here)
    assert sorted(r["text"] for r in ROWS) == sorted(
        t for t in (r["text"] for r in ROWS) if t in joined)
    assert len(joined) == sum(len(r["text"]) for r in ROWS)
    ctx = mp.get_context("spawn")
    with ctx.Pool(1) as pool:
        there = pool.apply(decoded_documents, (pickle.loads(pickle.dumps(ds)), daemon.socket))
    assert there == here, "the same stream in another process"
    assert os.path.isdir(root), "a copy in another process never removes the files"
    pid = os.fork()
    if pid == 0:  # a forked child dropping its inherited copy must not remove the files
        del ds
        gc.collect()
        os._exit(0 if os.path.isdir(root) else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0 and os.path.isdir(root)
    del ds
    gc.collect()
    assert not os.path.exists(root), "the directory goes with its Dataset"


def test_bad_rows_and_oversized_data_are_refused(monkeypatch):
    with pytest.raises(errors.InvalidOptionError, match=r"shard 0 row 1 is not JSON"):
        Dataset.from_dict("bad", [InMemoryShard([{"text": "a"}, {"text": b"bytes"}])])
    with pytest.raises(TypeError, match="row 0 is a str, not a dict"):
        InMemoryShard(["text"])
    monkeypatch.setenv("ZEPHON_IN_MEMORY_MAX_BYTES", "64")
    with pytest.raises(errors.InvalidOptionError, match=r"exceed 64 bytes .* Dataset.from_path"):
        Dataset.from_dict("big", [InMemoryShard(ROWS)])
    with pytest.raises(errors.InvalidOptionError, match="in-memory rows are JSONL"):
        Dataset.from_dict("fmt", [InMemoryShard(ROWS[:1])], fmt="parquet")


def test_token_rows_with_a_field(daemon, tmp_path, monkeypatch):
    monkeypatch.setenv("ZEPHON_IN_MEMORY_DIR", str(tmp_path / "mem"))
    rows = [{"input_ids": list(range(1 + i, 9 + i))} for i in range(16)]
    ds = Dataset.from_dict("ids", {0: InMemoryShard(rows)}, field="input_ids")
    assert os.path.dirname(ds.path) == str(tmp_path / "mem")
    p = (zephon.Pipeline(zephon.StaticMixtureWorkSource([ds], seed=0, chunk_size=16))
         .pack_flat(9).batch(2).options(daemon=daemon.socket, canonical_replicas=1))
    got, order = [], []
    for b in p:
        got += [t for row in b["tokens"].tolist() for t in row]
        for sid in b.ids:
            if not order or order[-1] != sid.index:
                order.append(sid.index)
    p.close()
    # wrap: 16 documents of 8 tokens in one flush group make 14 rows of 9 (2 dropped).
    assert len(got) == 14 * 9 and sorted(order) == list(range(16))
    expected = [t for i in order for t in rows[i]["input_ids"]]
    assert got == expected[:len(got)]
