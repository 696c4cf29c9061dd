"""A Parquet dataset (DuckDB-written, write_pipeline_files.mjs) keeps the engine's
guarantees through real zephond processes (tests/e2e/engine_checks.py), as token ids and
as text through tokenize: the same samples per global step for dp_degree 1, 2 and 4; a
checkpoint on dp_degree 2 restored on 1 and 4; TP peers given byte-identical batches; a
restore refused when the field or a file changed.

Needs `make setup-parquet` (DuckDB through npm); skips saying so otherwise."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "e2e"))
sys.path.insert(0, str(HERE.parents[1] / "client" / "python"))

from engine_checks import EngineGuarantees, RestoreRefusals  # noqa: E402
from test_checkpoint import nodes  # noqa: E402,F401  (the daemons fixture)
from test_parquet_pipeline import data  # noqa: E402,F401  (DuckDB-written files)


class TestParquetTokens(EngineGuarantees, RestoreRefusals):
    FORMAT, FOLDER = "parquet", "tokens"
    FIELD, OTHER_FIELD = "input_ids", "ids64"  # list<int32>, list<int64>: the same ids
    CHANGED_SHARD = r"shard 1 \(part-1\.parquet\)"

    def rewrite(self, data: Path, folder: Path) -> None:
        shutil.copyfile(data / "tokens-changed" / "part-1.parquet", folder / "part-1.parquet")


class TestParquetText(EngineGuarantees):
    """A text column (snappy, data page v2, nulls) through tokenize."""
    FORMAT, FOLDER, FIELD = "parquet", "texts", None

    def tokenize(self, data: Path) -> dict:
        return {"tokenizer": str(data / "tok" / "tokenizer.json"), "field": "text",
                "special_tokens": "eos"}
