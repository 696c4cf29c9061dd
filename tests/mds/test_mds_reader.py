"""The MDS reader (daemon/pipeline/formats/mds) against datasets written by
mds_writer.py, which follows MosaicML Streaming's writer: every compression and hash,
str/bytes/ndarray columns, fixed ndarrays, several shards, empty strings. mds_dump
prints what the reader yields; each test compares it with what was written.

Needs `bazel build //daemon/pipeline/formats/mds:mds_dump` (skips otherwise)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from mds_writer import MDSWriter

ROOT = Path(__file__).resolve().parents[2]
DUMP = ROOT / "bazel-bin/daemon/pipeline/formats/mds/mds_dump"

pytestmark = pytest.mark.skipif(
    not DUMP.exists(), reason="build it first: bazel build //daemon/pipeline/formats/mds:mds_dump")

COMPRESSIONS = [None, "zstd", "zstd:19", "gz", "gz:1", "bz2", "bz2:3", "br", "br:4", "snappy"]
HASHES = ["blake2b", "md5", "sha1", "sha256", "sha3_256", "xxh128", "xxh32", "xxh3_64", "xxh64"]


def dump(path: Path, field: str, kind: str) -> list[dict]:
    out = subprocess.run([str(DUMP), "--field", field, "--kind", kind, str(path)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def dump_error(path: Path, field: str, kind: str) -> str:
    out = subprocess.run([str(DUMP), "--field", field, "--kind", kind, str(path)],
                         capture_output=True, text=True)
    assert out.returncode == 1, out.stdout
    return out.stderr


def samples(n: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        length = int(rng.integers(0, 40))
        text = "".join(rng.choice(list("abcdé 中\n\"\\\t🙂"), size=length)) if i % 7 else ""
        ids = rng.integers(0, 65535, size=int(rng.integers(1, 30)))
        out.append({
            "text": text,
            "raw": text.encode("utf-8"),
            "u16": ids.astype(np.uint16),
            "i32": (ids * 1000).astype(np.int32),
            "i64": (ids * 30000).astype(np.int64),
            "any": ids.astype(np.uint32).reshape(1, -1),
            "fixed": np.arange(i, i + 8, dtype=np.int32).reshape(2, 4),
            "n": i,
        })
    return out


COLUMNS = {"text": "str", "raw": "bytes", "u16": "ndarray:uint16", "i32": "ndarray:int32",
           "i64": "ndarray:int64", "any": "ndarray", "fixed": "ndarray:int32:2,4", "n": "int"}


def write(path: Path, rows: list[dict], **kw) -> Path:
    with MDSWriter(columns=COLUMNS, out=str(path), **kw) as w:
        for row in rows:
            w.write(row)
    return path


def check_all_columns(path: Path, rows: list[dict]) -> None:
    for col in ("text", "raw"):
        got = dump(path, col, "text")
        assert [r["text"] for r in got] == [row["text"] for row in rows]
    for col in ("u16", "i32", "i64", "any", "fixed"):
        got = dump(path, col, "tokens")
        assert [r["tokens"] for r in got] == [row[col].ravel().tolist() for row in rows], col


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_every_compression_every_column(tmp_path, compression):
    rows = samples(60, seed=1)
    path = write(tmp_path / "ds", rows, compression=compression, hashes=HASHES,
                 size_limit=1 << 12)
    index = json.loads((path / "index.json").read_text())
    assert len(index["shards"]) > 1, "size_limit should split the dataset"
    if compression:
        assert all(s["zip_data"]["basename"].endswith("." + compression.split(":")[0])
                   for s in index["shards"])
    check_all_columns(path, rows)


def test_records_name_their_shard_and_sample_in_order(tmp_path):
    rows = samples(25, seed=2)
    path = write(tmp_path / "ds", rows, compression="zstd", size_limit=1 << 11)
    index = json.loads((path / "index.json").read_text())
    expected = []
    for shard in index["shards"]:
        expected += [(shard["zip_data"]["basename"], i) for i in range(shard["samples"])]
    got = dump(path, "text", "text")
    assert [(r["shard"], r["sample"]) for r in got] == expected


def test_one_big_shard_without_size_limit(tmp_path):
    rows = samples(300, seed=3)
    path = write(tmp_path / "ds", rows, size_limit=None, hashes=["sha1"])
    assert len(json.loads((path / "index.json").read_text())["shards"]) == 1
    check_all_columns(path, rows)


def test_large_token_ids_and_texts(tmp_path):
    rng = np.random.default_rng(4)
    big = rng.integers(0, 2**31 - 1, size=100_000, dtype=np.int64)
    text = "x" * 300_000 + "é"
    with MDSWriter(columns={"ids": "ndarray:int64", "t": "str"}, out=str(tmp_path / "ds"),
                   compression="zstd") as w:
        w.write({"ids": big, "t": text})
        w.write({"ids": np.array([2**31 - 1], np.int64), "t": ""})
    got = dump(tmp_path / "ds", "ids", "tokens")
    assert got[0]["tokens"] == big.tolist() and got[1]["tokens"] == [2**31 - 1]
    assert [r["text"] for r in dump(tmp_path / "ds", "t", "text")] == [text, ""]


def test_dynamic_ndarray_shapes_of_every_dim_width(tmp_path):
    # Streaming stores dims as uint8/uint16/uint32 by the largest dim; dtypes per value.
    arrays = [np.arange(300, dtype=np.int16), np.arange(70_000, dtype=np.uint32) % 5000,
              np.arange(12, dtype=np.uint64).reshape(2, 3, 2), np.array([[3]], np.int8)]
    with MDSWriter(columns={"any": "ndarray"}, out=str(tmp_path / "ds"), compression="br") as w:
        for a in arrays:
            w.write({"any": a})
    got = dump(tmp_path / "ds", "any", "tokens")
    assert [r["tokens"] for r in got] == [a.ravel().tolist() for a in arrays]


def test_empty_arrays_are_refused_by_streamings_writer(tmp_path):
    # NDArray.encode raises on 0 elements, so no MDS shard holds one (the reader still
    # decodes a 0 dim as no tokens: mds_encoding_test.cc ZeroDimIsEmpty).
    with pytest.raises(ValueError, match="0 elements"):
        with MDSWriter(columns={"ids": "ndarray:int32"}, out=str(tmp_path / "ds")) as w:
            w.write({"ids": np.array([], np.int32)})


def test_token_id_outside_int32_names_shard_sample_and_value(tmp_path):
    with MDSWriter(columns={"ids": "ndarray:int64"}, out=str(tmp_path / "ds")) as w:
        w.write({"ids": np.array([1, 2], np.int64)})
        w.write({"ids": np.array([5, 2**31], np.int64)})
    err = dump_error(tmp_path / "ds", "ids", "tokens")
    assert "INVALID_ARGUMENT" in err and "shard.00000.mds: sample 1" in err
    assert "2147483648" in err and "element 1" in err


def test_float_arrays_are_not_tokens(tmp_path):
    with MDSWriter(columns={"f": "ndarray:float32", "any": "ndarray"},
                   out=str(tmp_path / "ds")) as w:
        w.write({"f": np.ones(3, np.float32), "any": np.ones(3, np.float64)})
    assert "floats, not token ids" in dump_error(tmp_path / "ds", "f", "tokens")
    err = dump_error(tmp_path / "ds", "any", "tokens")
    assert "sample 0" in err and "float64" in err


def test_wrong_kind_and_missing_column(tmp_path):
    path = write(tmp_path / "ds", samples(3))
    err = dump_error(path, "text", "tokens")
    assert "INVALID_ARGUMENT" in err and "tokenize(field=\"text\")" in err
    assert "token ids, not text" in dump_error(path, "u16", "text")
    assert "not a list of token ids" in dump_error(path, "n", "tokens")
    err = dump_error(path, "nope", "text")
    assert "has no column \"nope\"" in err and "\"text\"" in err and "\"u16\"" in err


def test_hash_mismatch_is_data_loss(tmp_path):
    path = write(tmp_path / "ds", samples(5), compression="gz", hashes=["sha256", "xxh64"])
    index = json.loads((path / "index.json").read_text())
    index["shards"][0]["raw_data"]["hashes"]["xxh64"] = "0" * 16
    (path / "index.json").write_text(json.dumps(index))
    err = dump_error(path, "text", "text")
    assert "DATA_LOSS" in err and "xxh64" in err and "shard.00000.mds.gz (decompressed)" in err


def test_unknown_compression_and_encoding_are_unimplemented(tmp_path):
    path = write(tmp_path / "ds", samples(2))
    index = json.loads((path / "index.json").read_text())
    index["shards"][0]["compression"] = "lzma"
    (path / "index.json").write_text(json.dumps(index))
    err = dump_error(path, "text", "text")
    assert "UNIMPLEMENTED" in err and "lzma" in err and "shards[0]" in err
    index["shards"][0]["compression"] = None
    index["shards"][0]["column_encodings"][0] = "avro"
    (path / "index.json").write_text(json.dumps(index))
    err = dump_error(path, "text", "text")
    assert "UNIMPLEMENTED" in err and "avro" in err and "shards[0]" in err


def test_truncated_shard_is_data_loss(tmp_path):
    path = write(tmp_path / "ds", samples(5))
    shard = path / "shard.00000.mds"
    shard.write_bytes(shard.read_bytes()[:-3])
    err = dump_error(path, "text", "text")
    assert "DATA_LOSS" in err and "shard.00000.mds" in err


def test_info_checksum_is_the_index_sha256(tmp_path):
    import hashlib
    path = write(tmp_path / "ds", samples(4), size_limit=1 << 10)
    out = subprocess.run([str(DUMP), "--info", str(path)], capture_output=True, text=True)
    info = json.loads(out.stdout)
    index = json.loads((path / "index.json").read_text())
    assert info["samples"] == 4 and info["shards"] == len(index["shards"])
    assert info["checksum"] == hashlib.sha256((path / "index.json").read_bytes()).hexdigest()


@pytest.mark.parametrize("algo", HASHES)
def test_each_hash_is_verified(tmp_path, algo):
    path = write(tmp_path / "ds", samples(3), compression="bz2", hashes=[algo])
    assert [r["text"] for r in dump(path, "text", "text")] == [r["text"] for r in samples(3)]
    index = json.loads((path / "index.json").read_text())
    digest = index["shards"][0]["zip_data"]["hashes"][algo]
    index["shards"][0]["zip_data"]["hashes"][algo] = ("1" if digest[0] == "0" else "0") + digest[1:]
    (path / "index.json").write_text(json.dumps(index))
    err = dump_error(path, "text", "text")
    assert "DATA_LOSS" in err and f"shard.00000.mds.bz2: {algo} is {digest}" in err


@pytest.mark.parametrize("compression", ["zstd", "gz", "bz2"])
def test_concatenated_frames_read_as_pythons_decompressors_do(tmp_path, compression):
    # zstd.decompress, gzip.decompress and bz2.decompress read every frame / member /
    # stream of their input; a shard recompressed in two pieces reads the same.
    from mds_writer import compress
    rows = samples(20, seed=6)
    path = write(tmp_path / "ds", rows, compression=compression)
    index = json.loads((path / "index.json").read_text())
    shard = index["shards"][0]
    import bz2
    import gzip
    decompress = {"gz": gzip.decompress, "bz2": bz2.decompress}.get(compression)
    stored = path / shard["zip_data"]["basename"]
    if decompress is None:
        data = _zstd_decompress(stored.read_bytes(), shard["raw_data"]["bytes"])
    else:
        data = decompress(stored.read_bytes())
    half = len(data) // 2
    two = compress(compression, data[:half]) + compress(compression, data[half:])
    stored.write_bytes(two)
    shard["zip_data"]["bytes"] = len(two)
    shard["zip_data"]["hashes"] = {}
    (path / "index.json").write_text(json.dumps(index))
    assert [r["text"] for r in dump(path, "text", "text")] == [r["text"] for r in rows]


def _zstd_decompress(data: bytes, size: int) -> bytes:
    import ctypes
    import ctypes.util
    lib = ctypes.CDLL(ctypes.util.find_library("zstd"))
    lib.ZSTD_decompress.restype = ctypes.c_size_t
    lib.ZSTD_decompress.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p,
                                    ctypes.c_size_t]
    out = ctypes.create_string_buffer(size)
    n = lib.ZSTD_decompress(out, size, data, len(data))
    assert n == size
    return out.raw[:n]
