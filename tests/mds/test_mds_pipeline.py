"""MDS datasets through zephond end to end: shards written by the Streaming-following
writer (mds_writer.py), compressed and split into several shards, read as token ids
(an ndarray column) and as text (a str column through tokenize); each gives exactly
the batches of the same records written as JSONL."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "e2e"))
sys.path.insert(0, str(HERE.parents[1] / "client" / "python"))

import zephon  # noqa: E402
from mds_writer import MDSWriter  # noqa: E402
from zephond_process import Daemon  # noqa: E402
from test_tokenize_pipeline import tiny_tokenizer_json  # noqa: E402
from twin_batches import batch_digests, prompt_completion_batches  # noqa: E402

RECORDS = 900


def record(i: int) -> dict:
    ids = np.array([(x * 31 + i * 7) % 5000 for x in range(1 + (i * 13) % 90)], np.uint16)
    return {"tokens": ids, "text": ("ab a b " * (1 + (i * 5) % 40)) + f"row {i}"}


def write_mds_and_jsonl_twin(out: Path, columns: dict, n: int, make, to_json, *,
                             size_limit: int) -> list:
    """Writes records make(0..n-1) as MDS under out/mds and their JSONL twin under
    out/jsonl (to_json of each), one JSONL file per MDS shard of the same samples: a
    dataset's order depends on its shards, so the twins must have the same ones. Returns
    the MDS index's shards."""
    with MDSWriter(columns=columns, out=str(out / "mds"), compression="zstd",
                   hashes=["sha1"], size_limit=size_limit) as w:
        for i in range(n):
            w.write(make(i))
    shards = json.loads((out / "mds" / "index.json").read_text())["shards"]
    (out / "jsonl").mkdir()
    i = 0
    for s, shard in enumerate(shards):
        with open(out / "jsonl" / f"part-{s:03d}.jsonl", "w") as f:
            for _ in range(shard["samples"]):
                f.write(json.dumps(to_json(make(i))) + "\n")
                i += 1
    assert i == n
    return shards


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("mds-pipeline")
    shards = write_mds_and_jsonl_twin(
        out, {"tokens": "ndarray:uint16", "text": "str"}, RECORDS, record,
        lambda r: {"input_ids": r["tokens"].tolist(), "text": r["text"]}, size_limit=1 << 14)
    assert len(shards) > 3
    tok = out / "tok" / "tokenizer.json"
    tok.parent.mkdir()
    tok.write_text(tiny_tokenizer_json(), encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    d = Daemon(tmp_path_factory.mktemp("mds-daemon"), peer=False)
    yield d
    d.stop()


def batches(ds, daemon, tokenize=None) -> list[str]:
    out = batch_digests([ds], daemon.socket, seed=3, tokenize=tokenize)
    assert out
    return out


def test_ndarray_tokens_are_the_batches_of_their_jsonl_twin(data, daemon):
    mds = zephon.Dataset.from_path("d", str(data / "mds"), fmt="mds", field="tokens")
    js = zephon.Dataset.from_path("d", str(data / "jsonl"), fmt="jsonl", field="input_ids")
    assert batches(mds, daemon) == batches(js, daemon)


def test_str_column_tokenizes_as_its_jsonl_twin(data, daemon):
    tok = {"tokenizer": str(data / "tok" / "tokenizer.json"), "field": "text",
           "special_tokens": "eos"}
    mds = zephon.Dataset.from_path("t", str(data / "mds"), fmt="mds")
    js = zephon.Dataset.from_path("t", str(data / "jsonl"), fmt="jsonl")
    assert batches(mds, daemon, tok) == batches(js, daemon, tok)


def test_a_missing_column_lists_the_columns(data, daemon):
    mds = zephon.Dataset.from_path("x", str(data / "mds"), fmt="mds", field="ids")
    with pytest.raises(zephon.errors.ZephonError, match="tokens"):
        batches(mds, daemon)


def test_prompt_completion_columns_tokenize_as_their_jsonl_twin(tmp_path, data, daemon):
    """tokenize(field=["prompt", "completion"], loss_on=[...]) over two MDS str columns
    gives the tokens and loss masks of the JSONL records holding both fields."""
    def pc(i: int) -> dict:
        return {"prompt": f"question {i} " + "ab " * (i % 7),
                "completion": "a b " * (1 + i % 11) + f"answer {i * 3}"}

    shards = write_mds_and_jsonl_twin(tmp_path, {"prompt": "str", "completion": "str"}, 300,
                                      pc, lambda r: r, size_limit=1 << 12)
    assert len(shards) > 2
    tok = str(data / "tok" / "tokenizer.json")
    mds = zephon.Dataset.from_path("pc", str(tmp_path / "mds"), fmt="mds")
    js = zephon.Dataset.from_path("pc", str(tmp_path / "jsonl"), fmt="jsonl")
    want = prompt_completion_batches(js, daemon.socket, tok, seed=3)
    assert want and any(0 in sum(mask, []) and 1 in sum(mask, []) for _, mask in want)
    assert prompt_completion_batches(mds, daemon.socket, tok, seed=3) == want


def test_record_batches_carry_the_text_column_as_payload(data, daemon):
    # Record batches (no pack_flat) with preserve_upstream_payload: every record of the
    # Streaming-layout shards, its payload {"text": ...} and ids those of its JSONL twin.
    tok = str(data / "tok" / "tokenizer.json")

    def records(ds):
        ws = zephon.StaticMixtureWorkSource([ds], {ds.name: 1.0}, seed=3, chunk_size=1)
        p = (zephon.Pipeline(ws)
             .tokenize(tok, field="text", special_tokens="eos", preserve_upstream_payload=True)
             .batch(16, drop_last=False)
             .options(daemon=daemon.socket, canonical_replicas=4))
        out = [(r.payload["text"], tuple(r.payload["input_ids"].tolist()), r.meta.chunk_id)
               for b in p for r in b.records]
        p.close()
        return out

    mds = records(zephon.Dataset.from_path("t", str(data / "mds"), fmt="mds"))
    js = records(zephon.Dataset.from_path("t", str(data / "jsonl"), fmt="jsonl"))
    assert [(t, ids) for t, ids, _ in mds] == [(t, ids) for t, ids, _ in js]
    assert sorted(t for t, _, _ in mds) == sorted(record(i)["text"] for i in range(RECORDS))
    assert sorted(c for _, _, c in mds) == list(range(RECORDS)), "chunk_size 1: chunk = draw"
