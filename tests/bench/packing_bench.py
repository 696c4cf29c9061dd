"""pack_flat fill rate per algorithm against the best-fit-decreasing bound.

    PYTHONPATH=client/python /usr/bin/python3 tests/bench/packing_bench.py [--quick]

Two document sets, written once as Megatron datasets (uint16 token ids, lengths drawn
from a seeded lognormal and clipped to [1, max_length] so that every document fits a
record and no algorithm drops or splits one for being oversized):

  pretraining  lognormal, median 1,200 tokens, sigma 0.9; max_length 4097
  sft          lognormal, median 300 tokens, sigma 0.8; max_length 2049

Each algorithm packs the same documents through a real zephond (one lane,
canonical_replicas 1, default chunk size 1024 and flush every 8 chunks, so packing
state is emptied every 8,192 documents, as in a run) and every batch is read. Measured
from the batches themselves: fill = real cells / all cells (valid_tokens; wrap has no
padding), and the tokens that reached a batch vs the documents' tokens (wrap drops each
flush group's tail). The best-fit-decreasing bound packs the same lengths offline (all
documents sorted longest first, each into the open bin it leaves with the least room,
unbounded bins) in Python: fill_BFD = tokens / (bins x max_length); "vs BFD" is
fill / fill_BFD. BFD sees every document at once; the engine packs online, per lane and
per flush group, with a bounded buffer, so BFD is an upper bound, not a target.
"""
from __future__ import annotations

import argparse
import bisect
import datetime
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import zephon

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from zephond_process import Daemon  # noqa: E402

PAD = 0
ALGORITHMS = [
    ("wrap", {}),
    ("first_fit", {"num_bins": 16}),
    ("first_fit", {"num_bins": 256}),
    ("best_fit", {"num_bins": 16}),
    ("best_fit", {"num_bins": 256}),
    ("best_fit_wrap", {}),
]
SETS = {
    # name: (median length, sigma, max_length, documents, quick documents)
    "pretraining": (1200, 0.9, 4097, 24 * 1024, 6 * 1024),
    "sft": (300, 0.8, 2049, 60 * 1024, 15 * 1024),
}
# Whole chunks of the default chunk_size (1024): the work source yields every document.


def lengths_for(name: str, quick: bool) -> tuple[np.ndarray, int]:
    median, sigma, max_length, n, n_quick = SETS[name]
    rng = np.random.default_rng(16)
    raw = rng.lognormal(np.log(median), sigma, size=n_quick if quick else n)
    return np.clip(np.rint(raw), 1, max_length).astype(np.int64), max_length


def write_corpus(root: Path, lengths: np.ndarray) -> Path:
    rng = np.random.default_rng(5)
    docs = [rng.integers(1, 50000, size=int(n), dtype=np.int64) for n in lengths]
    root.mkdir(parents=True)
    out = root / "shard-0"
    zephon.write_megatron_dataset(out, docs, dtype=np.uint16)
    return root


def bfd_bins(lengths: np.ndarray, capacity: int) -> int:
    """Best-fit decreasing: the number of bins of `capacity` it uses."""
    rooms: list[int] = []  # sorted remaining room of every bin
    for n in sorted(lengths.tolist(), reverse=True):
        i = bisect.bisect_left(rooms, n)
        if i == len(rooms):
            bisect.insort(rooms, capacity - n)
        else:
            room = rooms.pop(i) - n
            bisect.insort(rooms, room)
    return len(rooms)


def run_algorithm(socket: str, corpus: Path, max_length: int, algorithm: str,
                  options: dict) -> dict:
    ds = zephon.Dataset.from_path("docs", str(corpus), fmt="megatron")
    ws = zephon.StaticMixtureWorkSource([ds], seed=1)
    pack = dict(options)
    if algorithm != "wrap":
        pack["pad_token_id"] = PAD
    pipe = (zephon.Pipeline(ws).pack_flat(max_length, algorithm=algorithm, **pack)
            .batch(8, drop_last=False)
            .options(daemon=socket, canonical_replicas=1, prefetch_batches=8))
    real = cells = records = 0
    start = time.perf_counter()
    for batch in pipe:
        rows, cols = batch["tokens"].shape
        records += rows
        cells += rows * cols
        real += int(batch["valid_tokens"].sum()) if "valid_tokens" in batch.keys() \
            else rows * cols
        batch.close()
    seconds = time.perf_counter() - start
    lane = zephon.daemon_status(socket)["instances"][0]["packing"][0]
    pipe.close()
    return {"records": records, "real": real, "cells": cells, "seconds": seconds,
            "split": int(lane.get("split_samples", 0)),
            "dropped_tokens": int(lane.get("dropped_tokens", 0)),
            "status_fill": int(lane.get("tokens", 0)) / max(1, int(lane.get("tokens", 0))
                                                           + int(lane.get("padding_cells", 0)))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a quarter of the documents")
    args = parser.parse_args()
    print(f"- date: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}")
    print(f"- machine: {platform.machine()}, {os.cpu_count()} CPUs, "
          f"python {platform.python_version()}")
    print(f"- command: tests/bench/packing_bench.py{' --quick' if args.quick else ''}\n")
    with tempfile.TemporaryDirectory(prefix="zephon-packing-bench-") as tmp:
        daemon = Daemon(Path(tmp) / "daemon", peer=False)
        try:
            for name in SETS:
                lengths, max_length = lengths_for(name, args.quick)
                corpus = write_corpus(Path(tmp) / name, lengths)
                total = int(lengths.sum())
                bins = bfd_bins(lengths, max_length)
                bfd_fill = total / (bins * max_length)
                print(f"### {name}: {len(lengths)} documents, {total} tokens, max_length "
                      f"{max_length}, median length {int(np.median(lengths))}, mean "
                      f"{lengths.mean():.0f}, longest {int(lengths.max())}")
                print(f"\nBFD bound: {bins} records, fill {100 * bfd_fill:.2f}%\n")
                print("| algorithm | options | records | fill | vs BFD | tokens kept "
                      "| split docs | seconds |")
                print("|---|---|---:|---:|---:|---:|---:|---:|")
                for algorithm, options in ALGORITHMS:
                    r = run_algorithm(daemon.socket, corpus, max_length, algorithm, options)
                    fill = r["real"] / r["cells"]
                    if algorithm != "wrap":  # nothing is oversized: every token arrives
                        assert r["real"] == total, (algorithm, r["real"], total)
                    assert abs(fill - r["status_fill"]) < 1e-9, (fill, r["status_fill"])
                    shown = ", ".join(f"{k}={v}" for k, v in options.items()) or (
                        "candidate_pool_size=1024" if algorithm == "best_fit_wrap" else "-")
                    print(f"| {algorithm} | {shown} | {r['records']} | {100 * fill:.2f}% | "
                          f"{fill / bfd_fill:.3f} | {100 * r['real'] / total:.2f}% | "
                          f"{r['split']} | {r['seconds']:.2f} |")
                print()
        finally:
            daemon.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
