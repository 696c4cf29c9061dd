"""Regenerates daemon/pipeline/formats/mds/testdata (the shards the C++ tests mutate)
with mds_writer.py, which follows Streaming's writer:
  /usr/bin/python3 tests/mds/write_testdata.py daemon/pipeline/formats/mds/testdata"""
from __future__ import annotations

import shutil
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


def main(out: Path) -> None:
    for name, compression in (("plain", None), ("zstd", "zstd")):
        shutil.rmtree(out / name, ignore_errors=True)
        with MDSWriter(columns=COLUMNS, out=str(out / name), compression=compression,
                       hashes=["sha1", "xxh64"]) as w:
            for row in ROWS:
                w.write(row)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main(Path(sys.argv[1]))
