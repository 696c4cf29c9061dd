"""Read throughput of a Megatron corpus from a local S3 server vs local disk.

    PYTHONPATH=client/python /usr/bin/python3 tests/bench/s3_read_bench.py [--quick] [--mb N]

One corpus (--mb, default 400 MB of uint16 tokens in 4 shards; generated once under
--workdir and reused) is read end to end by the real zephond + Python client (pack_flat
rows of 2,049 tokens, batches of 8, one pass) from:

  local disk              the files (in the page cache: the corpus was just written/read)
  s3, no disk cache       --shard-cache-bytes=0: every block is downloaded on every pass
  s3, cold cache          a fresh --cache-dir: the first pass downloads every block once
  s3, warm cache          the same daemon, a new pipeline instance: blocks come from the
                          node's cache files
  s3, warm restart        a new daemon on the same --cache-dir: it adopts the files

The S3 server is s3rver (tests/s3, `make setup-s3`) on loopback, so "s3" measures the
S3 protocol path (HTTP, SigV4, ranged GETs, the cache) without a network; on a real
network the cold figures are bounded by S3 bandwidth instead. Prints MB/s of token bytes
delivered and the ratio to local disk; --json writes the figures.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "e2e"))
sys.path.insert(0, str(HERE.parent / "s3"))
from zephond_process import Daemon  # noqa: E402
from s3rver import BUCKET, S3RVER, TOOL, Server  # noqa: E402

SEQ = 2049
MBS = 8
SHARDS = 4
PREFIX = "bench/corpus"


def make_corpus(workdir: Path, mb: int) -> Path:
    """4 Megatron shards totalling ~`mb` MB of uint16 tokens (documents of 100-1,500
    tokens); written once and reused (a .complete marker guards partial writes)."""
    import zephon
    corpus = workdir / f"corpus-{mb}mb"
    if (corpus / ".complete").exists():
        return corpus
    corpus.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(8)
    tokens_per_shard = mb * 1_000_000 // 2 // SHARDS
    for s in range(SHARDS):
        tokens = rng.integers(1, 50000, size=tokens_per_shard, dtype=np.uint16)
        lengths = rng.integers(100, 1501, size=tokens_per_shard // 100)
        ends = np.cumsum(lengths)
        ends = ends[ends < tokens_per_shard]
        starts = np.concatenate([[0], ends])
        stops = np.concatenate([ends, [tokens_per_shard]])
        zephon.write_megatron_dataset(corpus / f"shard-{s}",
                                      (tokens[a:b] for a, b in zip(starts, stops)),
                                      dtype=np.uint16)
    (corpus / ".complete").write_text("ok\n")
    return corpus


def upload(corpus: Path) -> float:
    begun = time.monotonic()
    for f in sorted(corpus.glob("shard-*")):
        r = subprocess.run([TOOL, "put", str(f), f"s3://{BUCKET}/{PREFIX}/{f.name}"],
                           capture_output=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(f"upload of {f} failed: {r.stderr.decode()}")
    return time.monotonic() - begun


def one_pass(path: str, d: Daemon, run: str) -> dict:
    """Reads the whole corpus once through a new pipeline instance."""
    import zephon
    ds = zephon.Dataset.from_path("web", path, fmt="megatron")
    ws = zephon.StaticMixtureWorkSource([ds], seed=3, chunk_size=1024)
    p = (zephon.Pipeline(ws).pack_flat(max_length=SEQ).batch(MBS)
         .options(daemon=d.socket, canonical_replicas=1, run_id=run, world_size=1,
                  global_rank=0))
    before = d.status().get("shard_cache", {})
    begun = time.monotonic()
    batches = 0
    for _ in p:
        batches += 1
    seconds = time.monotonic() - begun
    p.close()
    after = d.status().get("shard_cache", {})
    token_bytes = batches * MBS * SEQ * 2
    return {"seconds": seconds, "batches": batches, "token_bytes": token_bytes,
            "mb_per_s": token_bytes / seconds / 1e6,
            "downloaded_mb": (int(after.get("bytes_downloaded", 0)) -
                              int(before.get("bytes_downloaded", 0))) / 1e6}


def median_pass(passes: list[dict]) -> dict:
    best = sorted(passes, key=lambda r: r["seconds"])[len(passes) // 2]
    return dict(best, passes=[round(r["seconds"], 3) for r in passes])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=400, help="corpus size in MB (token bytes)")
    ap.add_argument("--quick", action="store_true", help="a 100 MB corpus, fewer passes")
    ap.add_argument("--repeat", type=int, default=3, help="passes per warm configuration")
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(),
                                                      "zephon-s3-bench"))
    ap.add_argument("--worker-threads", type=int, default=1)
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()
    if args.quick:
        args.mb, args.repeat = 100, 2
    if not os.path.exists(S3RVER) or not os.path.exists(TOOL):
        print(f"needs s3rver ({S3RVER}: make setup-s3) and s3_tool ({TOOL}: "
              "bazel build //daemon/storage:s3_tool)", file=sys.stderr)
        return 2
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    corpus = make_corpus(workdir, args.mb)
    corpus_bytes = sum(f.stat().st_size for f in corpus.glob("shard-*"))
    print(f"corpus {corpus}: {corpus_bytes / 1e6:.0f} MB in {SHARDS} shards "
          f"({time.monotonic() - t0:.1f} s)", flush=True)

    server = Server()
    os.environ.update({"AWS_ENDPOINT_URL": server.endpoint, "AWS_ACCESS_KEY_ID": "S3RVER",
                       "AWS_SECRET_ACCESS_KEY": "S3RVER", "AWS_REGION": "us-east-1"})
    os.environ.pop("AWS_SESSION_TOKEN", None)
    rows: list[tuple[str, dict]] = []
    daemons: list[Daemon] = []
    run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=workdir))

    def daemon(name: str, *extra: str, cache: str | None = None) -> Daemon:
        d = Daemon(run_dir / name, ["--cache-dir", cache or str(run_dir / name / "cache"),
                                    f"--worker-threads={args.worker_threads}", *extra])
        daemons.append(d)
        return d

    try:
        up = upload(corpus)
        print(f"uploaded to {server.endpoint}: {corpus_bytes / up / 1e6:.0f} MB/s "
              f"({up:.1f} s)", flush=True)
        url = f"s3://{BUCKET}/{PREFIX}"
        big = max(corpus.glob("shard-*.bin"), key=lambda f: f.stat().st_size)
        begun = time.monotonic()
        r = subprocess.run([TOOL, "get", f"s3://{BUCKET}/{PREFIX}/{big.name}",
                            str(run_dir / "get.bin")], capture_output=True, timeout=600)
        assert r.returncode == 0, r.stderr.decode()
        get_mb_s = big.stat().st_size / (time.monotonic() - begun) / 1e6
        os.unlink(run_dir / "get.bin")
        print(f"s3_tool get of one {big.stat().st_size / 1e6:.0f} MB object: "
              f"{get_mb_s:.0f} MB/s (one GET, one stream)", flush=True)

        local = daemon("local")
        one_pass(str(corpus), local, "warmup")
        rows.append(("local disk", median_pass(
            [one_pass(str(corpus), local, f"l{i}") for i in range(args.repeat)])))
        print("local done", flush=True)

        nocache = daemon("nocache", "--shard-cache-bytes=0")
        rows.append(("s3, no disk cache (--shard-cache-bytes=0)", median_pass(
            [one_pass(url, nocache, f"n{i}") for i in range(max(1, args.repeat - 1))])))
        print("no-cache done", flush=True)

        cached = daemon("cached")
        rows.append(("s3, cold cache (first pass)", median_pass([one_pass(url, cached, "c")])))
        rows.append(("s3, warm cache (next instances)", median_pass(
            [one_pass(url, cached, f"w{i}") for i in range(args.repeat)])))
        cache_dir = str(run_dir / "cached" / "cache")
        assert cached.stop() == 0
        restarted = daemon("restarted", cache=cache_dir)
        rows.append(("s3, warm restart (cache adopted)", median_pass(
            [one_pass(url, restarted, "r")])))
        status = restarted.status()["shard_cache"]
    finally:
        for d in daemons:
            d.stop()
        server.stop()
        shutil.rmtree(run_dir, ignore_errors=True)  # the caches; the corpus is kept

    base = rows[0][1]["mb_per_s"]
    print()
    print(f"host: {platform.node()} {platform.machine()}, {os.cpu_count()} CPUs, "
          f"{platform.system()} {platform.release()}; zephond --worker-threads="
          f"{args.worker_threads}; corpus {corpus_bytes / 1e6:.0f} MB; block 8 MiB")
    print(f"{'setup':44s} {'s/pass':>8s} {'MB/s':>8s} {'vs local':>9s} {'downloaded MB':>14s}")
    for name, r in rows:
        print(f"{name:44s} {r['seconds']:8.2f} {r['mb_per_s']:8.0f} "
              f"{r['mb_per_s'] / base:8.2f}x {r['downloaded_mb']:14.0f}")
    print(f"(reference: one s3_tool GET {get_mb_s:.0f} MB/s; upload {corpus_bytes / up / 1e6:.0f}"
          f" MB/s; restarted daemon adopted {status['adopted']} cache entries)")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "corpus_bytes": corpus_bytes, "get_mb_per_s": get_mb_s,
            "rows": [{"setup": n, **r} for n, r in rows]}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
