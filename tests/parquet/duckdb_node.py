"""DuckDB (npm `@duckdb/node-api`, installed by `make setup-parquet`) as the tests'
reference Parquet writer and reader: the node scripts beside this file."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def require_duckdb() -> None:
    """Skips the calling test, saying how to install DuckDB, when it is missing."""
    if shutil.which("node") is None or not (HERE / "node_modules" / "@duckdb" / "node-api").is_dir():
        pytest.skip("DuckDB not installed: run `make setup-parquet`")


def run_node(script: str, *args: str) -> subprocess.CompletedProcess:
    """Runs `script` (beside this file) under node with `args`; its stdout as bytes."""
    require_duckdb()
    return subprocess.run(["node", str(HERE / script), *args], capture_output=True, check=True,
                          cwd=HERE)
