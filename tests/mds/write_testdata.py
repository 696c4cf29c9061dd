"""Regenerates daemon/pipeline/formats/mds/testdata (the shards the C++ tests mutate) and
the seed corpus of tests/fuzz/mds_fuzzer.cc with mds_writer.py, which follows
Streaming's writer:
  /usr/bin/python3 tests/mds/write_testdata.py daemon/pipeline/formats/mds/testdata \
      tests/fuzz/corpus/mds"""
from __future__ import annotations

import json
import shutil
import struct
import sys
from pathlib import Path

import numpy as np

from mds_writer import MDSWriter

COLUMNS = {"text": "str", "ids": "ndarray:uint16", "any": "ndarray", "n": "int"}
ROWS = [
    {"text": "hello", "ids": np.array([1, 2, 3], np.uint16),
     "any": np.array([[7, 8]], np.int64), "n": 0},
    {"text": "", "ids": np.array([65535], np.uint16), "any": np.array([9], np.uint8), "n": 1},
    {"text": "héllo wörld", "ids": np.array([4, 5], np.uint16),
     "any": np.array([10, 11, 12], np.int32), "n": 2},
]


def write(out: Path, compression: str | None, hashes: list[str]) -> None:
    shutil.rmtree(out, ignore_errors=True)
    with MDSWriter(columns=COLUMNS, out=str(out), compression=compression, hashes=hashes) as w:
        for row in ROWS:
            w.write(row)


# mds_fuzzer.cc's mode byte: compression in the low 3 bits, the column read above them.
FUZZ_COMPRESSIONS = [None, "zstd", "gz", "bz2", "br", "snappy"]
FUZZ_COLUMNS = ["any", "ids", "text"]


def fuzz_seeds(out: Path, tmp: Path) -> None:
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    for c, compression in enumerate(FUZZ_COMPRESSIONS):
        write(tmp / str(c), compression, [])
        shard = json.loads((tmp / str(c) / "index.json").read_text())["shards"][0]
        stored = (tmp / str(c) / (shard["zip_data"] or shard["raw_data"])["basename"]).read_bytes()
        header = b"" if compression is None else struct.pack(
            "<II", shard["raw_data"]["bytes"], shard["samples"])
        for k, column in enumerate(FUZZ_COLUMNS):
            mode = bytes([c | (k << 3)])
            (out / f"seed-{compression or 'none'}-{column}").write_bytes(mode + header + stored)


def main(out: Path, seeds: Path | None) -> None:
    write(out / "plain", None, ["sha1", "xxh64"])
    write(out / "zstd", "zstd", ["sha1", "xxh64"])
    if seeds is not None:
        fuzz_seeds(seeds, out / "tmp-seeds")
        shutil.rmtree(out / "tmp-seeds")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else None)
