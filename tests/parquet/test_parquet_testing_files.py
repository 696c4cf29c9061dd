"""Legacy Parquet files from apache/parquet-testing (testdata/parquet-testing/README.md)
through Zephon's reader (parquet_dump): the deprecated LZ4 codec, Hadoop-framed (one
frame and several per page) and as one raw block, reads as DuckDB reads the LZ4_RAW
files of the same rows; unannotated repeated INT32 fields read as DuckDB reads them; what
the reader does not read (lists of lists, lists of strings, a footer contradicting its
row groups) is refused with an error naming the file, the field and the fix.

The DuckDB comparisons need `make setup-parquet`; everything needs
`bazel build //daemon/pipeline/formats/parquet:parquet_dump`; each skips saying so."""
import json
import os
import subprocess

import pytest

from duckdb_node import run_node

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DUMP = os.path.join(ROOT, "bazel-bin/daemon/pipeline/formats/parquet/parquet_dump")
FILES = os.path.join(HERE, "testdata", "parquet-testing")


@pytest.fixture(autouse=True)
def built():
    if not os.path.exists(DUMP):
        pytest.skip("parquet_dump not built: bazel build //daemon/pipeline/formats/parquet:parquet_dump")


def duckdb(name, expr, kind):
    """DuckDB's readback of column `expr` of testdata file `name`, row by row."""
    r = run_node("read_column.mjs", os.path.join(FILES, name), expr, kind)
    return [json.loads(line) for line in r.stdout.decode().splitlines()]


def dump(name, field, kind):
    return subprocess.run([DUMP, "--field", field, "--kind", kind, os.path.join(FILES, name)],
                          capture_output=True)


def rows(name, field, kind):
    r = dump(name, field, kind)
    assert r.returncode == 0, f"{name} field {field}: {r.stderr.decode()}"
    return [json.loads(line) for line in r.stdout.decode().splitlines()]


def refused(name, field, kind) -> str:
    r = dump(name, field, kind)
    assert r.returncode == 1 and r.stdout == b"", f"{name} field {field} was read"
    err = r.stderr.decode()
    assert os.path.join(FILES, name) in err, err
    return err


@pytest.mark.parametrize("name,twin,field,rows_", [
    ("hadoop_lz4_compressed.parquet", "lz4_raw_compressed.parquet", "c1", 4),
    ("non_hadoop_lz4_compressed.parquet", "lz4_raw_compressed.parquet", "c1", 4),
    ("hadoop_lz4_compressed_larger.parquet", "lz4_raw_compressed_larger.parquet", "a", 10000),
])
def test_lz4_reads_as_duckdb_reads_the_lz4_raw_twin(name, twin, field, rows_):
    got = rows(name, field, "text")
    assert len(got) == rows_
    assert got == duckdb(twin, field, "text")


def test_lz4_files_without_duckdb_hold_their_documented_rows():
    # Arrow's reader tests document these values for the three LZ4 files.
    want = [{"text": t} for t in ("abc", "def", "abc", "def")]
    assert rows("hadoop_lz4_compressed.parquet", "c1", "text") == want
    assert rows("non_hadoop_lz4_compressed.parquet", "c1", "text") == want
    larger = rows("hadoop_lz4_compressed_larger.parquet", "a", "text")
    assert larger[0] == {"text": "c7ce6bef-d5b0-4863-b199-8ea8c7fb117b"}
    assert len(larger) == 10000


@pytest.mark.parametrize("field", ["Int32_list", "group_of_lists.Int32_list_in_group"])
def test_unannotated_repeated_int32_reads_as_duckdb_reads_it(field):
    got = rows("repeated_primitive_no_list.parquet", field, "tokens")
    assert got == [{"tokens": [0, 1, 2, 3]}, {"tokens": []}, {"tokens": [4]},
                   {"tokens": [5, 6, 7, 8]}]
    assert got == duckdb("repeated_primitive_no_list.parquet", field, "tokens")


def test_an_unannotated_list_of_strings_is_refused_naming_the_fix():
    err = refused("repeated_primitive_no_list.parquet", "String_list", "text")
    assert "INVALID_ARGUMENT" in err
    assert ("field 'String_list' is a list of BYTE_ARRAY, not text: name a string column "
            "for tokenize(field=...)") in err


@pytest.mark.parametrize("name", ["old_list_structure.parquet", "nested_lists.snappy.parquet"])
def test_legacy_lists_of_lists_are_refused_as_unimplemented(name):
    err = refused(name, "a", "tokens")
    assert "UNIMPLEMENTED" in err
    assert "field 'a' is a list of structs, maps or lists; name a list<int32> or list<int64> column" in err


def test_a_footer_contradicting_its_row_groups_is_data_loss():
    # parquet-rs 0.3.0 wrote num_rows 0; the reader trusts neither count.
    err = refused("repeated_no_annotation.parquet", "id", "tokens")
    assert "DATA_LOSS" in err
    assert "the row groups hold 6 rows, the footer's num_rows says 0" in err
