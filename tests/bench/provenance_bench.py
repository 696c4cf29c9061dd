"""What provenance costs: the audit log's effect on a daemon's batch rate, and how long
`zephonctl which` takes to answer for far steps, counted from the run's start.

    make bench-provenance [BENCH_ARGS="--runs 3 --batches 3000"]
    PYTHONPATH=client/python /usr/bin/python3 tests/bench/provenance_bench.py

Corpus: 20,000 documents of lognormal lengths (mean ~800 tokens, uint16), written here.
Pipeline: shuffle(8192), pack_flat(2049), batch(8), exhausted_policy "repeat".

* audit: one rank reads --batches batches (64 KiB of tokens each) from a real zephond,
  with and without audit=True, alternating, --runs times each; batches/s is printed with
  the ratio. The audit hashes every batch's tokens (SHA-256) on the producer thread and
  appends ~200 bytes to a file.
* which: `zephonctl which --step N` for N = 10^3 .. 10^6 on three step shapes; the time is
  the whole command (process start, opening the corpus, counting flush groups on every
  core). Counted from the start it grows with the documents drawn before step N
  (docs/provenance.md); then the same spec with step anchors in the cache (a private
  XDG_CACHE_HOME): the first query at 10^6 counts and keeps them, later ones read them.
No figure is asserted on.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import zephon

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from zephond_process import Daemon, zephonctl_path  # noqa: E402


def corpus(root: Path) -> str:
    rng = np.random.default_rng(1)
    lengths = np.clip(rng.lognormal(6.4, 0.8, 20_000).astype(int), 16, 8000)
    docs = [rng.integers(0, 50_000, n, dtype=np.int64) for n in lengths]
    zephon.write_megatron_dataset(root / "web", docs, dtype=np.uint16)
    return str(root / "web")


def pipeline(prefix: str, max_length=2049, mbs=8, lanes=1, **options) -> zephon.Pipeline:
    ds = zephon.Dataset.from_path("web", prefix, fmt="megatron")
    ws = zephon.StaticMixtureWorkSource([ds], seed=1, exhausted_policy="repeat")
    return (zephon.Pipeline(ws).shuffle(8192, seed=1).pack_flat(max_length=max_length)
            .batch(mbs).options(canonical_replicas=lanes, **options))


def rate(prefix: str, socket: str, agg: Path, audit: bool, batches: int) -> float:
    p = pipeline(prefix, daemon=socket, run_id="bench", aggregate_dir=str(agg), audit=audit)
    it = iter(p)
    next(it).close()
    t = time.perf_counter()
    for _ in range(batches):
        next(it).close()
    dt = time.perf_counter() - t
    p.close()
    return batches / dt


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--batches", type=int, default=3000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="zephon-prov-bench-") as tmp:
        root = Path(tmp)
        (root / "corpus").mkdir()
        prefix = corpus(root / "corpus")
        d = Daemon(root / "daemon")
        try:
            rates: dict[bool, list[float]] = {False: [], True: []}
            for _ in range(args.runs):
                for audit in (False, True):
                    rates[audit].append(rate(prefix, d.socket, root / "agg", audit, args.batches))
        finally:
            d.stop()
        print(f"audit log: batches/s of one rank (8 x 2049 tokens), median of {args.runs}")
        for audit in (False, True):
            print(f"  audit={str(audit):5}  {statistics.median(rates[audit]):9.0f}  "
                  f"(runs {', '.join(f'{r:.0f}' for r in rates[audit])})")
        print(f"  ratio audit / none: "
              f"{statistics.median(rates[True]) / statistics.median(rates[False]):.2f}")
        # Step anchors go to the cache: a private one, so each figure below is what it says.
        env = dict(os.environ, XDG_CACHE_HOME=str(root / "cache"))

        def which(spec: Path, n: int, *extra: str) -> str:
            t = time.perf_counter()
            out = subprocess.run([zephonctl_path(), "which", "--spec", str(spec), "--step",
                                  str(n), *extra], capture_output=True, text=True,
                                 timeout=600, env=env)
            dt = time.perf_counter() - t
            return f"{dt:9.2f}" if out.returncode == 0 else f"{'error':>9}"

        shapes = [(4097, 1, 8), (2049, 8, 8), (8193, 4, 64)]
        specs = []
        for max_length, mbs, lanes in shapes:
            spec = root / f"spec-{max_length}-{mbs}-{lanes}.json"
            spec.write_text(json.dumps(pipeline(prefix, max_length, mbs, lanes)._request()))
            specs.append((f"pack_flat({max_length}).batch({mbs}), C = B = {lanes}", spec))
        print("zephonctl which --step N --count-from-start: no anchors (whole command, s)")
        print(f"  {'shape':42} " + " ".join(f"{n:>9}" for n in ("1e3", "1e4", "1e5", "1e6")))
        for shape, spec in specs:
            cells = [which(spec, n, "--count-from-start") for n in (10**3, 10**4, 10**5, 10**6)]
            print(f"  {shape:42} " + " ".join(cells))
        print("zephonctl which --step N with the cache's step anchors (whole command, s):")
        print("  the first query at 1e6 counts and keeps anchors; later ones start from them")
        print(f"  {'shape':42} " + " ".join(f"{n:>9}" for n in ("1e6", "1e6", "999999",
                                                               "500000")))
        for shape, spec in specs:
            cells = [which(spec, n) for n in (10**6, 10**6, 999_999, 500_000)]
            print(f"  {shape:42} " + " ".join(cells))
        anchors = sum(f.stat().st_size for f in (root / "cache").rglob("*.zaudit"))
        print(f"  anchors kept for the three specs: {anchors / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
