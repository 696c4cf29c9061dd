"""make bench-parquet: decoding a zstd Parquet text column on one thread, ours vs DuckDB.

    /usr/bin/python3 tests/bench/parquet_bench.py [--mb 300] [--rounds 3]

DuckDB (tests/parquet's @duckdb/node-api, `make setup-parquet`) writes --mb megabytes of
text (tests/tokenize/corpus's documents, repeated, each copy suffixed with its row number)
as one zstd Parquet file. Then, in alternating rounds on the same file (this host's speed
drifts): //daemon/pipeline/formats/parquet:parquet_dump --sum (OpenParquetRecords reading
the text column: every page read, decompressed and decoded, the string lengths summed;
one thread, process start included) and DuckDB `SET threads=1; SELECT sum(length(text))`
(the query's wall time). Prints MB/s of text for each (best round) and the ratio.
Then the same for a pre-tokenized column: DuckDB writes --token-rows rows of 2,048-id
list<int32> `input_ids` (zstd); parquet_dump --sum --kind tokens vs DuckDB
`SELECT sum(len(input_ids))`, in token ids/s.
Figures only; nothing is asserted on time.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PARQUET = ROOT / "tests" / "parquet"
DUMP = ROOT / "bazel-bin" / "daemon" / "pipeline" / "formats" / "parquet" / "parquet_dump"
CORPUS = ROOT / "tests" / "tokenize" / "corpus" / "corpus.jsonl"


def alternate(path: Path, field: str, kind: str, duckdb_expr: str,
              rounds: int) -> tuple[list[float], list[float], int]:
    """Alternating rounds of parquet_dump --sum and DuckDB's query on `path`: (our
    seconds, DuckDB's seconds, the total parquet_dump reports)."""
    ours, theirs = [], []
    total = 0
    for _ in range(rounds):
        t = time.perf_counter()
        r = subprocess.run([str(DUMP), "--sum", "--field", field, "--kind", kind, str(path)],
                           check=True, capture_output=True)
        ours.append(time.perf_counter() - t)
        total = json.loads(r.stdout)["total"]
        r = subprocess.run(["node", "bench_duckdb.mjs", "read", str(path), "1", duckdb_expr],
                           cwd=PARQUET, check=True, capture_output=True)
        theirs += json.loads(r.stdout)["seconds"]
    return ours, theirs, total


def seconds(v: list[float]) -> str:
    return ", ".join(f"{s:.2f}" for s in v)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--token-rows", type=int, default=25000)
    args = ap.parse_args()
    if not (PARQUET / "node_modules" / "@duckdb" / "node-api").is_dir():
        print("DuckDB not installed: run `make setup-parquet`", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "text.parquet"
        subprocess.run(["node", "bench_duckdb.mjs", "write", str(CORPUS), str(path),
                        str(args.mb)], cwd=PARQUET, check=True, capture_output=True)
        ours, theirs, text_bytes = alternate(path, "text", "text", "sum(length(text))",
                                             args.rounds)
        mb = text_bytes / 1e6
        print(f"file: {path.stat().st_size / 1e6:.1f} MB zstd Parquet (DuckDB), "
              f"{mb:.1f} MB of text; {args.rounds} alternating rounds, best of each; "
              f"{os.cpu_count()} cores")
        print(f"zephon parquet_dump --sum (1 thread): {mb / min(ours):8.1f} MB/s  "
              f"({seconds(ours)} s)")
        print(f"DuckDB threads=1 sum(length(text)):  {mb / min(theirs):8.1f} MB/s  "
              f"({seconds(theirs)} s)")
        print(f"ratio (zephon / DuckDB): {min(theirs) / min(ours):.2f}x")

        path = Path(tmp) / "tokens.parquet"
        subprocess.run(["node", "bench_duckdb.mjs", "write-tokens", str(path),
                        str(args.token_rows)], cwd=PARQUET, check=True, capture_output=True)
        ours, theirs, tokens = alternate(path, "input_ids", "tokens", "sum(len(input_ids))",
                                         args.rounds)
        print(f"tokens: {path.stat().st_size / 1e6:.1f} MB zstd Parquet (DuckDB), "
              f"{tokens / 1e6:.1f}M token ids in {args.token_rows} rows of list<int32>")
        print(f"zephon parquet_dump --sum --kind tokens: {tokens / min(ours) / 1e6:8.1f} M ids/s"
              f"  ({seconds(ours)} s)")
        print(f"DuckDB threads=1 sum(len(input_ids)):    {tokens / min(theirs) / 1e6:8.1f} M ids/s"
              f"  ({seconds(theirs)} s)")
        print(f"ratio (zephon / DuckDB): {min(theirs) / min(ours):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
