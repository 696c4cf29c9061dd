"""Time to first batch: a rank that starts (or restarts after a fault) and asks for its
first batch, against Megatron-LM's GPTDataset + DataLoader on the same corpus.

    make bench-first-batch [BENCH_ARGS="--megatron-lm /path/to/Megatron-LM --runs 7"]
    /usr/bin/python3 tests/bench/first_batch_bench.py [--prefix P] [--megatron-lm DIR]
        [--runs 5] [--seq-length 2048] [--micro-batch 8] [--shuffle 8192] [--json]

Each run is a fresh Python process (a restarted rank) that has imported zephon and numpy;
the clock starts before the Pipeline is built and stops when the first batch is in hand:

* ``auto-start``: no daemon on the node. The first attach starts zephond (as every
  pipeline does when nothing answers at its socket), waits for it and attaches.
* ``attach``: a zephond already runs (the node's daemon survived the trainer's fault);
  the rank attaches, the daemon creates the instance, orders the shuffle buffer
  (``shuffle(8192)`` before ``pack_flat``: 8192 sample ids) and packs the first batch.
  The pipeline is built 0.5 s after ``import zephon``, standing for the trainer's own
  start-up (process group, model), during which the client's one-time gRPC and protobuf
  setup runs on a thread of its own (``zephon_warm_up``, ~5 ms on 2 cores).
* ``attach right after import``: the same with no start-up in between, so the first
  attach waits for (and competes with) that setup.
* ``attach, ZEPHON_WARM_UP=0``: as ``attach`` with that setup left to the first attach.
* ``attach, no shuffle``: as ``attach`` without the shuffle buffer, for reference.
* ``re-attach in the same process``: each rank then builds the same pipeline again (a
  pipeline rebuilt in a live trainer).

The corpus is ``--prefix`` (a Megatron .bin/.idx pair) or, without it, one written here:
20,000 documents of lognormal lengths (mean ~800 tokens, uint16), ~32 MB. The pipeline is
the Megatron-equivalent one: ``pack_flat(max_length=seq+1).batch(micro_batch)``, one DP
rank.

With ``--megatron-lm`` (a Megatron-LM checkout), ``megatron_baseline.py`` runs beside it
in processes of its own, with and without DataLoader workers and the attention mask:
``first_batch_s`` there is dataset construction (index build on a cold index cache, or
memory-mapping the cached .npy files when warm) plus the DataLoader's first batch; its
1.2 s import is not counted, as ``import zephon`` is not. Without it the Megatron rows
are left out with the reason printed (no checkout is vendored: none is reachable offline).
No figure is asserted on.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PYTHON = "/usr/bin/python3"
DOCS = 20_000
# What the "attach" rows leave between `import zephon` and building the pipeline: a
# trainer's start-up (process group, model) takes seconds; half a second is plenty.
STARTUP_GAP_S = 0.5
SEED = 1234


# ----- the child: one restarted rank ---------------------------------------------------
def _child(args: argparse.Namespace) -> None:
    t_import = time.perf_counter()
    import zephon
    import_s = time.perf_counter() - t_import
    # The trainer's own start-up between `import zephon` and building the pipeline
    # (torch.distributed init, the model): zephon's one-time client setup runs on a
    # thread of its own meanwhile (ZEPHON_WARM_UP). 0 = build it at once.
    time.sleep(args.startup_gap)

    def first_batch() -> tuple[float, list[int]]:
        t0 = time.perf_counter()
        ds = zephon.Dataset.from_path("web", args.prefix, fmt="megatron")
        ws = zephon.StaticMixtureWorkSource([ds], seed=SEED)
        pipe = zephon.Pipeline(ws)
        if args.shuffle:
            pipe = pipe.shuffle(args.shuffle, seed=SEED)
        pipe = (pipe.pack_flat(max_length=args.seq_length + 1).batch(args.micro_batch)
                .options(daemon=args.socket, canonical_replicas=1))
        batch = next(iter(pipe))
        elapsed = time.perf_counter() - t0
        shape = list(batch["tokens"].shape)
        batch.close()
        pipe.close()
        return elapsed, shape

    t0 = time.perf_counter()
    first, shape = first_batch()
    pid = int(zephon.daemon_status(args.socket)["pid"])
    # The same again in this process (a pipeline rebuilt in a live trainer, e.g. after
    # an elastic change): gRPC and protobuf's one-time setup is paid already.
    again, _ = first_batch()
    print(json.dumps({"first_batch_s": first, "again_s": again, "import_s": import_s,
                      "tokens_shape": shape, "daemon_pid": pid}))


def _run_child(prefix: str, socket: str, shuffle: int, seq: int, mbs: int,
               gap: float = 0.0, warm_up: bool = True) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "client" / "python"),
               ZEPHON_IDLE_EXIT_S="60", ZEPHON_WARM_UP="1" if warm_up else "0")
    out = subprocess.run([PYTHON, __file__, "--child", "--prefix", prefix, "--socket", socket,
                          "--shuffle", str(shuffle), "--seq-length", str(seq),
                          "--startup-gap", str(gap),
                          "--micro-batch", str(mbs)],
                         env=env, capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise SystemExit(f"first_batch_bench: a rank failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _stop(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)


def _private_dir(parent: Path, name: str) -> Path:
    d = parent / name
    d.mkdir(mode=0o700)
    return d


def _summary(samples: list[float]) -> dict:
    return {"median_ms": round(1000 * statistics.median(samples), 1),
            "min_ms": round(1000 * min(samples), 1), "max_ms": round(1000 * max(samples), 1),
            "runs": len(samples)}


def measure_zephon(prefix: str, runs: int, shuffle: int, seq: int, mbs: int,
                   work: Path) -> dict:
    """auto-start, attach and attach-without-shuffle figures (seconds per run)."""
    auto, imports = [], []
    for i in range(runs):
        socket = str(_private_dir(work, f"auto{i}") / "zephond.sock")
        r = _run_child(prefix, socket, shuffle, seq, mbs)
        _stop(r["daemon_pid"])
        auto.append(r["first_batch_s"])
        imports.append(r["import_s"])

    # One daemon for the attach runs, started as an operator (or the first rank) would.
    socket = str(_private_dir(work, "running") / "zephond.sock")
    warmup = _run_child(prefix, socket, shuffle, seq, mbs)
    at_once = [_run_child(prefix, socket, shuffle, seq, mbs) for _ in range(runs)]
    attach = [_run_child(prefix, socket, shuffle, seq, mbs, STARTUP_GAP_S)
              for _ in range(runs)]
    plain = [_run_child(prefix, socket, 0, seq, mbs, STARTUP_GAP_S) for _ in range(runs)]
    cold = [_run_child(prefix, socket, shuffle, seq, mbs, STARTUP_GAP_S, warm_up=False)
            for _ in range(runs)]
    _stop(warmup["daemon_pid"])
    return {"auto_start": _summary(auto),
            "attach_at_once": _summary([r["first_batch_s"] for r in at_once]),
            "attach_shuffle": _summary([r["first_batch_s"] for r in attach]),
            "attach_no_shuffle": _summary([r["first_batch_s"] for r in plain]),
            "attach_no_warm_up": _summary([r["first_batch_s"] for r in cold]),
            "reattach_shuffle": _summary([r["again_s"] for r in attach]),
            "reattach_no_shuffle": _summary([r["again_s"] for r in plain]),
            "import_zephon_ms": round(1000 * statistics.median(imports), 1),
            "tokens_shape": warmup["tokens_shape"]}


def measure_megatron(megatron_lm: str, prefix: str, seq: int, mbs: int) -> list[dict]:
    rows = []
    for workers in (0, 2):
        for mask in (True, False):
            cmd = [PYTHON, str(HERE / "megatron_baseline.py"), "--megatron-lm", megatron_lm,
                   "--prefix", prefix, "--seq-length", str(seq), "--micro-batch", str(mbs),
                   "--batches", "20", "--workers", str(workers), "--json"]
            if not mask:
                cmd.append("--no-attention-mask")
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
            if out.returncode != 0:
                raise SystemExit(f"first_batch_bench: megatron_baseline failed:\n{out.stderr}")
            r = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append({"workers": workers, "attention_mask": mask,
                         "cold_ms": round(1000 * r["cold"]["first_batch_s"], 1),
                         "warm_ms": round(1000 * r["warm"]["first_batch_s"], 1),
                         "commit": r["megatron_commit"]})
    return rows


def write_corpus(work: Path) -> str:
    sys.path.insert(0, str(ROOT / "client" / "python"))
    import numpy as np
    import zephon
    rng = np.random.default_rng(SEED)
    lengths = np.clip(rng.lognormal(mean=6.4, sigma=0.7, size=DOCS), 16, 16384).astype(int)
    docs = [rng.integers(1, 50_000, size=n, dtype=np.uint16) for n in lengths]
    prefix = work / "corpus" / "shard-0"
    prefix.parent.mkdir()
    zephon.write_megatron_dataset(prefix, docs, dtype=np.uint16)
    return str(prefix)


def _format(result: dict) -> str:
    z = result["zephon"]
    lines = [f"First batch, seq {result['seq_length']}, micro-batch {result['micro_batch']}, "
             f"corpus {result['prefix']} ({result['corpus_mb']} MB); "
             f"median (min-max) of {z['auto_start']['runs']} fresh processes",
             f"  {'zephon auto-start (no daemon yet)':52} "
             f"{z['auto_start']['median_ms']:8.1f} ms "
             f"({z['auto_start']['min_ms']}-{z['auto_start']['max_ms']})",
             f"  {'zephon attach right after import, shuffle(%d)' % result['shuffle']:52} "
             f"{z['attach_at_once']['median_ms']:8.1f} ms "
             f"({z['attach_at_once']['min_ms']}-{z['attach_at_once']['max_ms']})",
             f"  {'zephon attach, shuffle(%d)' % result['shuffle']:52} "
             f"{z['attach_shuffle']['median_ms']:8.1f} ms "
             f"({z['attach_shuffle']['min_ms']}-{z['attach_shuffle']['max_ms']})",
             f"  {'zephon attach, shuffle(%d), ZEPHON_WARM_UP=0' % result['shuffle']:52} "
             f"{z['attach_no_warm_up']['median_ms']:8.1f} ms "
             f"({z['attach_no_warm_up']['min_ms']}-{z['attach_no_warm_up']['max_ms']})",
             f"  {'zephon attach, no shuffle':52} "
             f"{z['attach_no_shuffle']['median_ms']:8.1f} ms "
             f"({z['attach_no_shuffle']['min_ms']}-{z['attach_no_shuffle']['max_ms']})",
             f"  {'zephon re-attach in the same process, shuffle(%d)' % result['shuffle']:52} "
             f"{z['reattach_shuffle']['median_ms']:8.1f} ms "
             f"({z['reattach_shuffle']['min_ms']}-{z['reattach_shuffle']['max_ms']})",
             f"  {'zephon re-attach in the same process, no shuffle':52} "
             f"{z['reattach_no_shuffle']['median_ms']:8.1f} ms "
             f"({z['reattach_no_shuffle']['min_ms']}-{z['reattach_no_shuffle']['max_ms']})",
             f"  (import zephon: {z['import_zephon_ms']} ms, not counted)"]
    mg = result.get("megatron")
    if not mg:
        lines.append(f"  Megatron GPTDataset: not run ({result['megatron_skipped']})")
        return "\n".join(lines)
    commit = mg[0]["commit"] or "unknown: the checkout has no .git"
    lines.append(f"  Megatron GPTDataset + DataLoader (commit {commit}), cold / warm index "
                 "cache:")
    for row in mg:
        label = (f"workers {row['workers']}, attention mask "
                 f"{'on' if row['attention_mask'] else 'off'}")
        lines.append(f"    {label:42} {row['cold_ms']:8.1f} / {row['warm_ms']:.1f} ms   "
                     f"auto-start x{row['cold_ms'] / z['auto_start']['median_ms']:.2f}, "
                     f"attach x{row['warm_ms'] / z['attach_shuffle']['median_ms']:.1f}")
    lines.append("  (x = Megatron's time / Zephon's: auto-start against a cold index cache, "
                 "attach against a warm one)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prefix", help="Megatron .bin/.idx prefix (default: write one)")
    ap.add_argument("--megatron-lm", help="Megatron-LM checkout for the baseline rows")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seq-length", type=int, default=2048)
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument("--shuffle", type=int, default=8192)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--socket", help=argparse.SUPPRESS)
    ap.add_argument("--startup-gap", type=float, default=0.0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(args)
        return 0
    if args.runs < 1:
        ap.error("--runs must be >= 1")
    work = Path(tempfile.mkdtemp(prefix="zephon-first-batch-"))
    try:
        prefix = args.prefix or write_corpus(work)
        result = {"bench": "first_batch", "prefix": prefix, "seq_length": args.seq_length,
                  "micro_batch": args.micro_batch, "shuffle": args.shuffle,
                  "corpus_mb": round(os.path.getsize(prefix + ".bin") / 2**20, 1),
                  "zephon": measure_zephon(prefix, args.runs, args.shuffle, args.seq_length,
                                           args.micro_batch, work)}
        if args.megatron_lm:
            result["megatron"] = measure_megatron(args.megatron_lm, prefix, args.seq_length,
                                                  args.micro_batch)
        else:
            result["megatron_skipped"] = ("no --megatron-lm checkout given: pass "
                                          "BENCH_ARGS=\"--megatron-lm DIR\"")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result) if args.json else _format(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
