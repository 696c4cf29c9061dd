"""An MDS dataset (shards from mds_writer.py, which follows MosaicML Streaming's writer)
keeps the engine's guarantees through real zephond processes (tests/e2e/engine_checks.py):
the same samples per global step for dp_degree 1, 2 and 4; a checkpoint on dp_degree 2
restored on 1 and 4; TP peers given byte-identical batches (token ids, and text through
tokenize); a restore refused when the field or the shards changed."""
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

from engine_checks import EngineGuarantees, RestoreRefusals  # noqa: E402
from mds_writer import MDSWriter  # noqa: E402
from test_checkpoint import nodes  # noqa: E402,F401  (the daemons fixture)
from test_tokenize_pipeline import tiny_tokenizer_json  # noqa: E402

RECORDS = 1200


def word(n: int) -> str:
    """A word of the tiny tokenizer's alphabet (a, b) spelling n's low 10 bits."""
    return "".join("ab"[(n >> k) & 1] for k in range(10))


def write(out: Path, salt: int) -> Path:
    """RECORDS samples of 1-90 token ids, zstd shards of at most 32 KiB (several shards);
    `tokens` (uint16) and `tokens32` (int32) hold the same ids, `text` some text; `salt`
    shifts them."""
    columns = {"tokens": "ndarray:uint16", "tokens32": "ndarray:int32", "text": "str"}
    with MDSWriter(columns=columns, out=str(out), compression="zstd", hashes=["sha1"],
                   size_limit=1 << 15) as w:
        for i in range(RECORDS):
            ids = [(x * 31 + i * 7 + salt) % 5000 for x in range(1 + (i * 13) % 90)]
            w.write({"tokens": np.array(ids, np.uint16), "tokens32": np.array(ids, np.int32),
                     "text": " ".join(word(i * 37 + j + salt) for j in range(1 + i % 20))})
    return out


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("mds-engine")
    write(out / "mds", 0)
    assert len(json.loads((out / "mds" / "index.json").read_text())["shards"]) > 3
    write(out / "mds-changed", 17)
    (out / "tokenizer.json").write_text(tiny_tokenizer_json(), encoding="utf-8")
    return out


class TestMdsTokens(EngineGuarantees, RestoreRefusals):
    FORMAT, FOLDER = "mds", "mds"
    FIELD, OTHER_FIELD = "tokens", "tokens32"  # uint16 and int32 arrays: the same ids
    CHANGED_SHARD = r"shard 0 \(shard\.00000\.mds\.zstd\)"

    def rewrite(self, data: Path, folder: Path) -> None:
        shutil.rmtree(folder)
        shutil.copytree(data / "mds-changed", folder)


class TestMdsText(EngineGuarantees):
    """A str column through tokenize."""
    FORMAT, FOLDER, FIELD = "mds", "mds", None

    def tokenize(self, data: Path) -> dict:
        return {"tokenizer": str(data / "tokenizer.json"), "field": "text",
                "special_tokens": "eos"}
