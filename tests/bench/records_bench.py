"""make bench-records: a pre-tokenized Parquet `input_ids` column -> packed batches
through zephond, against the same tokens as a Megatron dataset, side by side.

    /usr/bin/python3 tests/bench/records_bench.py [--rows N] [--rounds R]

DuckDB (tests/parquet's @duckdb/node-api, `make setup-parquet`) writes N rows (default
60,000: 123M ids) of a 2,048-id list<int32> column (zstd), ids spread over a 128K
vocabulary with small ids frequent, so the file compresses like real token ids (about
2.5 bytes an id) rather than to nothing; the same ids are written as a Megatron dataset
(int32), and a check compares a few rows as DuckDB reads them back. Each round, on one zephond (--worker-threads 1, fresh token cache per round):
  parquet cold   the first attach converts the file into the token cache, then one
                 pass of batches: tokens/s over the whole time from attach to the last
                 batch (what the first epoch of a run sees);
  parquet warm   a second attach reads the cache: one pass;
  megatron       the same tokens as .bin/.idx: one pass.
pack_flat(4097) -> batch(8), tokens/s = batches x 8 x 4097 / seconds. The issue asks
for >= 0.5x the Megatron path.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "client" / "python"))
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

import zephon  # noqa: E402
from zephond_process import Daemon  # noqa: E402

SEQ, MBS, IDS = 4097, 8, 2048


def bench_ids(row: int) -> np.ndarray:
    """Row `row`'s ids, as tests/parquet/bench_duckdb.mjs write-tokens computes them."""
    y = ((row * IDS + np.arange(IDS, dtype=np.int64)) * 2654435761) % 4294967296
    return ((y % 65536) * (y // 65536) // 33554).astype(np.int32)


def one_pass(ds, socket: str) -> tuple[float, int]:
    ws = zephon.StaticMixtureWorkSource([ds], seed=1, chunk_size=64)
    p = (zephon.Pipeline(ws).pack_flat(max_length=SEQ).batch(MBS)
         .options(daemon=socket, attach_timeout_s=600))
    t0 = time.perf_counter()
    n = sum(1 for _ in p)
    seconds = time.perf_counter() - t0
    p.close()
    return seconds, n


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=60000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    pq_dir = ROOT / "tests" / "parquet"
    if not (pq_dir / "node_modules" / "@duckdb" / "node-api").is_dir():
        sys.exit("bench-records: DuckDB is missing: run `make setup-parquet`")
    work = Path(tempfile.mkdtemp(prefix="zephon-records-bench-"))
    try:
        return measure(args, pq_dir, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)  # GBs of files


def measure(args: argparse.Namespace, pq_dir: Path, work: Path) -> int:
    (work / "parquet").mkdir()
    subprocess.run(["node", "bench_duckdb.mjs", "write-tokens",
                    str(work / "parquet" / "tokens.parquet"), str(args.rows)],
                   cwd=pq_dir, check=True, capture_output=True)
    docs = [bench_ids(r) for r in range(args.rows)]
    # The twin holds DuckDB's ids: their sum as DuckDB reads the file back.
    out = subprocess.run(["node", "bench_duckdb.mjs", "read",
                          str(work / "parquet" / "tokens.parquet"), "1",
                          "sum(list_sum(input_ids))"],
                         cwd=pq_dir, check=True, capture_output=True, text=True)
    duckdb_sum = int(json.loads(out.stdout)["sum"])
    if duckdb_sum != sum(int(d.sum()) for d in docs):
        sys.exit(f"bench-records: DuckDB's ids (sum {duckdb_sum}) differ from the Megatron twin's")
    (work / "megatron").mkdir()
    zephon.write_megatron_dataset(work / "megatron" / "tokens", docs, dtype=np.int32)
    tokens = args.rows * IDS
    print(f"machine: {os.cpu_count()} CPUs; {args.rows} rows x {IDS} ids = {tokens / 1e6:.1f}M "
          f"tokens; Parquet {os.path.getsize(work / 'parquet' / 'tokens.parquet') / 1e6:.1f} MB "
          f"(zstd, DuckDB: {os.path.getsize(work / 'parquet' / 'tokens.parquet') / tokens:.2f} "
          f"bytes an id); batches of {MBS} x {SEQ}; zephond --worker-threads 1")
    print(f"command: /usr/bin/python3 tests/bench/records_bench.py --rows {args.rows} "
          f"--rounds {args.rounds}\n")
    best: dict[str, float] = {}
    for rnd in range(args.rounds):
        d = Daemon(work / f"d{rnd}", extra_args=["--worker-threads", "1", "--cache-dir",
                                                 str(work / f"cache{rnd}")], peer=False)
        try:
            pq = zephon.Dataset.from_path("t", str(work / "parquet"), fmt="parquet",
                                          field="input_ids")
            mg = zephon.Dataset.from_path("t", str(work / "megatron" / "tokens"),
                                          fmt="megatron")
            line = f"   round {rnd + 1}:"
            for name, ds in (("parquet cold", pq), ("parquet warm", pq), ("megatron", mg)):
                seconds, n = one_pass(ds, d.socket)
                rate = n * MBS * SEQ / seconds
                best[name] = max(best.get(name, 0.0), rate)
                line += f" | {name} {rate / 1e6:6.1f} M tokens/s ({n} batches, {seconds:.2f} s)"
            print(line)
        finally:
            d.stop()
    print(f"\n   best of {args.rounds}: parquet cold {best['parquet cold'] / 1e6:.1f}, warm "
          f"{best['parquet warm'] / 1e6:.1f}, megatron {best['megatron'] / 1e6:.1f} M tokens/s")
    print(f"   ratio to megatron: cold x{best['parquet cold'] / best['megatron']:.2f}, "
          f"warm x{best['parquet warm'] / best['megatron']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
