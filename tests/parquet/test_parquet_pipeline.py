"""Parquet datasets through zephond end to end, against the same records as JSONL: files
written by DuckDB (write_pipeline_files.mjs), their JSONL twins from what DuckDB reads
back. Token-id columns and text columns (tokenize) give exactly the batches of their
twins; null rows are skipped and counted, or an error naming the file and row. A legacy
file from parquet-testing (codec LZ4, Hadoop-framed) gives the batches of its LZ4_RAW twin.

Needs `make setup-parquet` (DuckDB through npm); skips saying so otherwise."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "e2e"))
sys.path.insert(0, str(HERE.parents[1] / "client" / "python"))

import zephon  # noqa: E402
from zephond_process import Daemon  # noqa: E402
from duckdb_node import require_duckdb, run_node  # noqa: E402
from test_tokenize_pipeline import tiny_tokenizer_json  # noqa: E402
from twin_batches import batch_digests  # noqa: E402


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    require_duckdb()
    out = tmp_path_factory.mktemp("pq-pipeline")
    run_node("write_pipeline_files.mjs", str(out))
    tok = out / "tok" / "tokenizer.json"
    tok.parent.mkdir()
    tok.write_text(tiny_tokenizer_json(), encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    d = Daemon(tmp_path_factory.mktemp("pq-daemon"), peer=False)
    yield d
    d.stop()


def batches(ds, daemon, tokenize=None, n=None) -> list[str]:
    out = batch_digests([ds], daemon.socket, seed=7, tokenize=tokenize, limit=n)
    assert out
    return out


def test_token_ids_are_the_batches_of_their_jsonl_twin(data, daemon):
    pq = zephon.Dataset.from_path("d", str(data / "tokens"), fmt="parquet", field="input_ids")
    js = zephon.Dataset.from_path("d", str(data / "tokens-jsonl"), fmt="jsonl",
                                  field="input_ids")
    assert batches(pq, daemon) == batches(js, daemon)


def test_auto_detected_format_reads_the_same(data, daemon):
    pq = zephon.Dataset.from_path("d", str(data / "tokens"), field="input_ids")
    js = zephon.Dataset.from_path("d", str(data / "tokens-jsonl"), field="input_ids")
    assert batches(pq, daemon, n=20) == batches(js, daemon, n=20)


def test_text_column_tokenizes_as_its_jsonl_twin(data, daemon):
    tok = {"tokenizer": str(data / "tok" / "tokenizer.json"), "field": "text",
           "special_tokens": "eos"}
    pq = zephon.Dataset.from_path("t", str(data / "texts"), fmt="parquet")
    js = zephon.Dataset.from_path("t", str(data / "texts-jsonl"), fmt="jsonl")
    assert batches(pq, daemon, tok) == batches(js, daemon, tok)


def test_struct_field_by_dotted_path(data, daemon):
    pq = zephon.Dataset.from_path("m", str(data / "texts"), fmt="parquet")
    js = zephon.Dataset.from_path("m", str(data / "meta-jsonl"), fmt="jsonl")
    tok = {"tokenizer": str(data / "tok" / "tokenizer.json"), "special_tokens": "eos"}
    assert (batches(pq, daemon, dict(tok, field="meta.text")) ==
            batches(js, daemon, dict(tok, field="text")))


def test_on_null_error_names_the_file_and_row(data, daemon):
    pq = zephon.Dataset.from_path("e", str(data / "tokens"), fmt="parquet", field="input_ids",
                                  on_null="error")
    with pytest.raises(zephon.errors.ZephonError, match=r"part-0\.parquet.*row 4"):
        batches(pq, daemon, n=1)


def test_a_missing_column_lists_the_columns(data, daemon):
    pq = zephon.Dataset.from_path("x", str(data / "tokens"), fmt="parquet", field="ids")
    with pytest.raises(zephon.errors.ZephonError, match="input_ids"):
        batches(pq, daemon, n=1)


def test_mixed_with_another_format_as_its_twin_is(data, daemon):
    """A Parquet dataset in a mixture with a JSONL one gives the batches of the same
    mixture with the Parquet dataset replaced by its JSONL twin."""
    other = zephon.Dataset.from_path("other", str(data / "tokens-jsonl"), fmt="jsonl",
                                     field="input_ids")

    def mixed(first) -> list[str]:
        out = batch_digests([first, other], daemon.socket, seed=11, chunk_size=8,
                            mixture=[2, 1])
        assert out
        return out

    pq = zephon.Dataset.from_path("d", str(data / "tokens"), fmt="parquet", field="input_ids")
    js = zephon.Dataset.from_path("d", str(data / "tokens-jsonl"), fmt="jsonl",
                                  field="input_ids")
    assert mixed(pq) == mixed(js)


def test_legacy_lz4_gives_the_batches_of_its_lz4_raw_twin(daemon, tmp_path):
    """parquet-testing's Hadoop-framed LZ4 file (several frames a page) through the daemon,
    tokenized, gives the batches of the LZ4_RAW file of the same 10000 rows."""
    (tmp_path / "tokenizer.json").write_text(tiny_tokenizer_json(), encoding="utf-8")
    tok = {"tokenizer": str(tmp_path / "tokenizer.json"), "special_tokens": "eos",
           "field": "a"}
    digests = []
    for name in ("hadoop_lz4_compressed_larger.parquet", "lz4_raw_compressed_larger.parquet"):
        (tmp_path / name).mkdir()
        shutil.copyfile(HERE / "testdata" / "parquet-testing" / name, tmp_path / name / name)
        ds = zephon.Dataset.from_path("lz4", str(tmp_path / name), fmt="parquet")
        digests.append(batches(ds, daemon, tok))
    assert digests[0] == digests[1]


def _record_texts(ds, daemon, tokenizer) -> list[tuple[str, tuple[int, ...]]]:
    # chunk_size 1: one pass holds every row (no trailing partial chunk to drop).
    ws = zephon.StaticMixtureWorkSource([ds], {ds.name: 1.0}, seed=7, chunk_size=1)
    p = (zephon.Pipeline(ws)
         .tokenize(tokenizer, field="text", special_tokens="eos", on_missing="skip",
                   preserve_upstream_payload=True)
         .batch(4, drop_last=False)
         .options(daemon=daemon.socket, canonical_replicas=2))
    out = [(r.payload["text"], tuple(r.payload["input_ids"].tolist()))
           for batch in p for r in batch.records]
    p.close()
    return out


def test_record_batches_carry_the_text_of_the_duckdb_rows(data, daemon):
    # Record batches (no pack_flat) with preserve_upstream_payload: each record is one
    # non-null row, its text the one DuckDB wrote and its ids the JSONL twin's.
    tok = str(data / "tok" / "tokenizer.json")
    pq = zephon.Dataset.from_path("t", str(data / "texts"), fmt="parquet")
    js = zephon.Dataset.from_path("t", str(data / "texts-jsonl"), fmt="jsonl")
    pq_records = _record_texts(pq, daemon, tok)
    assert pq_records == _record_texts(js, daemon, tok)
    import json
    rows = [json.loads(line)["text"] for f in sorted((data / "texts-jsonl").iterdir())
            for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert sorted(t for t, _ in pq_records) == sorted(t for t in rows if t is not None)
    encoder = zephon.Tokenizer(tok)
    assert all(ids == tuple(encoder.encode(t)) + (2,) for t, ids in pq_records[:20])
