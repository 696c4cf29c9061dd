"""Zephon's Parquet reader against real writers: every file DuckDB and arrow-rs
(parquet-wasm) write in write_files.mjs is read through parquet_dump (OpenParquetRecords)
and compared, row by row, with what DuckDB reads back from the same file.

Needs `make setup-parquet` (npm packages pinned in tests/parquet/package-lock.json) and
`bazel build //daemon/pipeline/formats/parquet:parquet_dump`; skips saying so otherwise.
"""
import json
import os
import shutil
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DUMP = os.path.join(ROOT, "bazel-bin/daemon/pipeline/formats/parquet/parquet_dump")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    if shutil.which("node") is None or not os.path.isdir(
            os.path.join(HERE, "node_modules", "@duckdb", "node-api")):
        pytest.skip("DuckDB/parquet-wasm not installed: run `make setup-parquet`")
    if not os.path.exists(DUMP):
        pytest.skip("parquet_dump not built: bazel build //daemon/pipeline/formats/parquet:parquet_dump")
    out = tmp_path_factory.mktemp("parquet")
    subprocess.run(["node", os.path.join(HERE, "write_files.mjs"), str(out)], check=True,
                   cwd=HERE)
    with open(out / "manifest.json") as f:
        return out, json.load(f)


def dump(path, field, kind, *extra):
    return subprocess.run([DUMP, *extra, "--field", field, "--kind", kind, str(path)],
                          capture_output=True)


def test_every_file_matches_duckdb_readback(files):
    out, manifest = files
    compared = 0
    for case in manifest:
        if "error" in case:
            continue
        r = dump(out / case["file"], case["field"], case["kind"])
        where = f'{case["file"]} field {case["field"]}'
        assert r.returncode == 0, f"{where}: {r.stderr.decode()}"
        got = [json.loads(line) for line in r.stdout.decode().splitlines()]
        with open(out / case["expected"]) as f:
            want = [json.loads(line) for line in f]
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            assert g == w, f"{where}: row {i}: {str(g)[:200]} != DuckDB's {str(w)[:200]}"
        compared += 1
    assert compared >= 40


def test_files_cover_nulls_empty_lists_and_large_strings(files):
    out, manifest = files
    kinds = set()
    for case in manifest:
        if "expected" not in case:
            continue
        with open(out / case["expected"]) as f:
            for line in f:
                v = json.loads(line)
                if v is None:
                    kinds.add("null")
                elif "tokens" in v and not v["tokens"]:
                    kinds.add("empty list")
                elif "text" in v and len(v["text"]) > 1 << 20:
                    kinds.add("large string")
    assert kinds == {"null", "empty list", "large string"}


def test_bad_token_lists_name_file_row_and_value(files):
    out, manifest = files
    errors = [c for c in manifest if "error" in c]
    assert len(errors) == 4
    for case in errors:
        r = dump(out / case["file"], case["field"], case["kind"])
        assert r.returncode == 1
        err = r.stderr.decode()
        assert "INVALID_ARGUMENT" in err and case["error"] in err, err
        assert f'{case["file"]}: row 1 (row group 0, page 0)' in err, err


def test_wrong_kind_and_missing_field_name_the_fix(files):
    out, _ = files
    r = dump(out / "duck_text_zstd_V1.parquet", "text", "tokens")
    assert r.returncode == 1
    assert "field 'text' is a string column: use tokenize(field='text')" in r.stderr.decode()
    r = dump(out / "duck_tokens_V1.parquet", "ids32", "text")
    assert "list<int32> column (token ids)" in r.stderr.decode()
    r = dump(out / "duck_text_zstd_V1.parquet", "body", "text")
    err = r.stderr.decode()
    assert "field 'body' is not a column" in err and "text, meta.text, meta.id" in err, err


def test_sum_mode_counts_what_it_decodes(files):
    out, _ = files
    r = dump(out / "duck_large.parquet", "text", "text", "--sum")
    assert r.returncode == 0, r.stderr.decode()
    summary = json.loads(r.stdout)
    assert summary["records"] == 5 and summary["nulls"] == 1
    assert summary["total"] == sum(1500000 + i + 5 for i in (0, 1, 3, 4))
