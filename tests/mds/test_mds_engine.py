"""An MDS dataset (shards from mds_writer.py, which follows MosaicML Streaming's writer)
keeps the engine's guarantees through real zephond processes (tests/e2e/engine_checks.py):
the same samples per global step for dp_degree 1, 2 and 4; a checkpoint on dp_degree 2
restored on 1 and 4; TP peers given byte-identical batches; a restore refused when the
field or the shards changed."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "e2e"))
sys.path.insert(0, str(HERE.parents[1] / "client" / "python"))

from engine_checks import EngineGuarantees  # noqa: E402
from mds_writer import MDSWriter  # noqa: E402
from test_checkpoint import nodes  # noqa: E402,F401  (the daemons fixture)

RECORDS = 1200


def write(out: Path, salt: int) -> Path:
    """RECORDS samples of 1-90 token ids, zstd shards of at most 16 KiB (several shards);
    `tokens` (uint16) and `tokens32` (int32) hold the same ids; `salt` shifts them."""
    with MDSWriter(columns={"tokens": "ndarray:uint16", "tokens32": "ndarray:int32"},
                   out=str(out), compression="zstd", hashes=["sha1"], size_limit=1 << 14) as w:
        for i in range(RECORDS):
            ids = [(x * 31 + i * 7 + salt) % 5000 for x in range(1 + (i * 13) % 90)]
            w.write({"tokens": np.array(ids, np.uint16), "tokens32": np.array(ids, np.int32)})
    return out


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("mds-engine")
    write(out / "mds", 0)
    assert len(json.loads((out / "mds" / "index.json").read_text())["shards"]) > 3
    write(out / "mds-changed", 17)
    return out


class TestMdsEngine(EngineGuarantees):
    FORMAT, FOLDER = "mds", "mds"
    FIELD, OTHER_FIELD = "tokens", "tokens32"  # uint16 and int32 arrays: the same ids
    CHANGED_SHARD = r"shard 0 \(shard\.00000\.mds\.zstd\)"

    def rewrite(self, data: Path, folder: Path) -> None:
        shutil.rmtree(folder)
        shutil.copytree(data / "mds-changed", folder)
