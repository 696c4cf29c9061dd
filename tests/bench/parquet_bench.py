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
        ours, theirs = [], []
        text_bytes = 0
        for _ in range(args.rounds):
            t = time.perf_counter()
            r = subprocess.run([str(DUMP), "--sum", "--field", "text", "--kind", "text",
                                str(path)], check=True, capture_output=True)
            ours.append(time.perf_counter() - t)
            text_bytes = json.loads(r.stdout)["total"]
            r = subprocess.run(["node", "bench_duckdb.mjs", "read", str(path), "1"],
                               cwd=PARQUET, check=True, capture_output=True)
            theirs += json.loads(r.stdout)["seconds"]
        mb = text_bytes / 1e6
        best_ours, best_theirs = min(ours), min(theirs)
        print(f"file: {path.stat().st_size / 1e6:.1f} MB zstd Parquet (DuckDB), "
              f"{mb:.1f} MB of text; {args.rounds} alternating rounds, best of each; "
              f"{os.cpu_count()} cores")
        print(f"zephon parquet_dump --sum (1 thread): {mb / best_ours:8.1f} MB/s  "
              f"({', '.join(f'{s:.2f}' for s in ours)} s)")
        print(f"DuckDB threads=1 sum(length(text)):  {mb / best_theirs:8.1f} MB/s  "
              f"({', '.join(f'{s:.2f}' for s in theirs)} s)")
        print(f"ratio (zephon / DuckDB): {best_theirs / best_ours:.2f}x")

        tokens_path = Path(tmp) / "tokens.parquet"
        subprocess.run(["node", "bench_duckdb.mjs", "write-tokens", str(tokens_path),
                        str(args.token_rows)], cwd=PARQUET, check=True, capture_output=True)
        ours, theirs = [], []
        tokens = 0
        for _ in range(args.rounds):
            t = time.perf_counter()
            r = subprocess.run([str(DUMP), "--sum", "--field", "input_ids", "--kind", "tokens",
                                str(tokens_path)], check=True, capture_output=True)
            ours.append(time.perf_counter() - t)
            tokens = json.loads(r.stdout)["total"]
            r = subprocess.run(["node", "bench_duckdb.mjs", "read", str(tokens_path), "1",
                                "sum(len(input_ids))"], cwd=PARQUET, check=True,
                               capture_output=True)
            theirs += json.loads(r.stdout)["seconds"]
        print(f"tokens: {tokens_path.stat().st_size / 1e6:.1f} MB zstd Parquet (DuckDB), "
              f"{tokens / 1e6:.1f}M token ids in {args.token_rows} rows of list<int32>")
        print(f"zephon parquet_dump --sum --kind tokens: {tokens / min(ours) / 1e6:8.1f} M ids/s")
        print(f"DuckDB threads=1 sum(len(input_ids)):    {tokens / min(theirs) / 1e6:8.1f} M ids/s")
        print(f"ratio (zephon / DuckDB): {min(theirs) / min(ours):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
