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
from twin_batches import batch_digests  # noqa: E402

RECORDS = 900


def record(i: int) -> dict:
    ids = np.array([(x * 31 + i * 7) % 5000 for x in range(1 + (i * 13) % 90)], np.uint16)
    return {"tokens": ids, "text": ("ab a b " * (1 + (i * 5) % 40)) + f"row {i}"}


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("mds-pipeline")
    with MDSWriter(columns={"tokens": "ndarray:uint16", "text": "str"}, out=str(out / "mds"),
                   compression="zstd", hashes=["sha1"], size_limit=1 << 14) as w:
        for i in range(RECORDS):
            w.write(record(i))
    # The JSONL twin has one file per MDS shard, of the same samples: a dataset's order
    # depends on its shards, so the twins must have the same ones.
    shards = json.loads((out / "mds" / "index.json").read_text())["shards"]
    assert len(shards) > 3
    (out / "jsonl").mkdir()
    i = 0
    for s, shard in enumerate(shards):
        with open(out / "jsonl" / f"part-{s:03d}.jsonl", "w") as f:
            for _ in range(shard["samples"]):
                r = record(i)
                f.write(json.dumps({"input_ids": r["tokens"].tolist(), "text": r["text"]}) + "\n")
                i += 1
    assert i == RECORDS
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


def sft_batches(ds, daemon, tok) -> list[tuple[list, list]]:
    """Tokens and loss masks of every batch of tokenize(fields) -> best_fit -> batch(2)."""
    ws = zephon.StaticMixtureWorkSource([ds], seed=3, chunk_size=16)
    pipe = (zephon.Pipeline(ws)
            .tokenize(tok, field=["prompt", "completion"], loss_on=["completion"],
                      special_tokens="bos_eos", bos_token_id=1, eos_token_id=2)
            .pack_flat(257, algorithm="best_fit", num_bins=4, pad_token_id=0)
            .batch(2).options(daemon=daemon.socket, canonical_replicas=1))
    out = [(np.array(b["tokens"]).tolist(), np.array(b["loss_mask"]).tolist()) for b in pipe]
    pipe.close()
    return out


def test_prompt_completion_columns_tokenize_as_their_jsonl_twin(tmp_path, data, daemon):
    """tokenize(field=["prompt", "completion"], loss_on=[...]) over two MDS str columns
    gives the tokens and loss masks of the JSONL records holding both fields."""
    def pc(i: int) -> dict:
        return {"prompt": f"question {i} " + "ab " * (i % 7),
                "completion": "a b " * (1 + i % 11) + f"answer {i * 3}"}

    with MDSWriter(columns={"prompt": "str", "completion": "str"}, out=str(tmp_path / "mds"),
                   compression="zstd", hashes=["sha1"], size_limit=1 << 12) as w:
        for i in range(300):
            w.write(pc(i))
    shards = json.loads((tmp_path / "mds" / "index.json").read_text())["shards"]
    assert len(shards) > 2
    (tmp_path / "jsonl").mkdir()
    i = 0
    for s, shard in enumerate(shards):
        with open(tmp_path / "jsonl" / f"part-{s:03d}.jsonl", "w") as f:
            for _ in range(shard["samples"]):
                f.write(json.dumps(pc(i)) + "\n")
                i += 1
    tok = str(data / "tok" / "tokenizer.json")
    mds = zephon.Dataset.from_path("pc", str(tmp_path / "mds"), fmt="mds")
    js = zephon.Dataset.from_path("pc", str(tmp_path / "jsonl"), fmt="jsonl")
    want = sft_batches(js, daemon, tok)
    assert want and any(0 in sum(mask, []) and 1 in sum(mask, []) for _, mask in want)
    assert sft_batches(mds, daemon, tok) == want
