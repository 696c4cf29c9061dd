"""Zephon (zephond + Python client) vs PyTorch DataLoader on the same packing job.

    PYTHONPATH=client/python /usr/bin/python3 tests/bench/loader_bench.py [--quick]

Same Megatron corpus, same batch shape (8 x 2049 tokens, wrap packing: a token stream
cut into rows, positions restarting at each document segment). Every configuration runs
in its own processes, side by side in one invocation, and the table reports batches/s,
tokens/s, CPU seconds per batch in the trainer process and in total (trainer + loader
workers or zephond), peak memory, and ratios against the best DataLoader setting. A second
table is the node view: 4 ranks in 2 DP groups (2 zephond instances, TP peers share) vs
4 per-rank pipelines (4 instances).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from zephond_process import Daemon  # noqa: E402  (one zephond helper for tests and benches)

SEQ = 2049
MBS = 8
TOKENS_PER_BATCH = SEQ * MBS


# ----------------------------------------------------------------------------------
# Corpus
def make_corpus(root: Path, num_docs: int) -> Path:
    import zephon
    from zephon.corpus import synthetic_documents
    corpus = root / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    docs = synthetic_documents(num_docs, seed=5, min_len=100, max_len=1500)
    half = num_docs // 2
    zephon.write_megatron_dataset(corpus / "shard-0", docs[:half])
    zephon.write_megatron_dataset(corpus / "shard-1", docs[half:])
    return corpus


# ----------------------------------------------------------------------------------
# PyTorch DataLoader baseline: a map-style dataset doing the same wrap packing.
class PackedMegatron:
    """Record i = tokens [i*SEQ, (i+1)*SEQ) of the concatenated documents (shards in name
    order, read through np.memmap like Megatron's own dataset), with positions restarting
    at each document segment."""

    def __init__(self, corpus: Path):
        self.shards, self.shard_starts, ends, total = [], [], [], 0
        for idx in sorted(corpus.glob("*.idx")):
            raw = idx.read_bytes()
            n = int(np.frombuffer(raw, np.uint64, 1, 18)[0])  # after magic, version, dtype
            sizes = np.frombuffer(raw, np.int32, n, 34).astype(np.int64)
            self.shards.append(np.memmap(idx.with_suffix(".bin"), dtype=np.uint16, mode="r"))
            self.shard_starts.append(total)
            ends.append(np.cumsum(sizes) + total)
            total += int(sizes.sum())
        self.total = total
        self.doc_ends = np.concatenate(ends)  # exclusive end offset of every document

    def __len__(self) -> int:
        return self.total // SEQ

    def _read(self, lo: int, hi: int) -> np.ndarray:
        out = np.empty(hi - lo, dtype=np.int64)
        pos = lo
        while pos < hi:
            s = int(np.searchsorted(self.shard_starts, pos, side="right")) - 1
            base = self.shard_starts[s]
            take = min(hi, base + len(self.shards[s])) - pos
            out[pos - lo:pos - lo + take] = self.shards[s][pos - base:pos - base + take]
            pos += take
        return out

    def __getitem__(self, i: int):
        import torch
        lo, hi = i * SEQ, (i + 1) * SEQ
        tokens = self._read(lo, hi)
        positions = np.arange(SEQ, dtype=np.int64)
        j = int(np.searchsorted(self.doc_ends, lo, side="right"))
        while j < len(self.doc_ends) and self.doc_ends[j] < hi:
            cut = int(self.doc_ends[j]) - lo
            positions[cut:] = np.arange(SEQ - cut)
            j += 1
        return {"tokens": torch.from_numpy(tokens), "positions": torch.from_numpy(positions)}


def run_dataloader(corpus: Path, workers: int, batches: int) -> dict:
    import torch
    from torch.utils.data import DataLoader
    ds = PackedMegatron(corpus)
    loader = DataLoader(ds, batch_size=MBS, num_workers=workers, shuffle=False,
                        drop_last=True, persistent_workers=False,
                        prefetch_factor=4 if workers else 2)
    it = iter(loader)
    first = next(it)  # startup (workers, first batch) is not steady state
    assert tuple(first["tokens"].shape) == (MBS, SEQ)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    for _ in range(batches):
        b = next(it)
        int(b["tokens"].sum())  # the same touch as the Zephon consumer
    wall = time.perf_counter() - wall0
    trainer_cpu = time.process_time() - cpu0
    del it, loader
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"wall_s": wall, "trainer_cpu_s": trainer_cpu,
            "worker_cpu_s": children.ru_utime + children.ru_stime,
            "trainer_peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            "worker_peak_kib": children.ru_maxrss * workers, "batches": batches}


# ----------------------------------------------------------------------------------
# Zephon
def zephon_pipeline(corpus: Path, socket: str, threads: int, **options):
    import zephon
    ds = zephon.Dataset.from_path("bench", str(corpus), fmt="megatron")
    ws = zephon.StaticMixtureWorkSource([ds], seed=1, chunk_size=4096, shuffle_shards=False,
                                        exhausted_policy="repeat")
    return (zephon.Pipeline(ws).pack_flat(max_length=SEQ).batch(MBS)
            .options(daemon=socket, num_threads=threads, **options))


def run_zephon_rank(corpus: Path, socket: str, threads: int, batches: int,
                    options: dict) -> dict:
    import torch
    import zephon
    pipe = zephon_pipeline(corpus, socket, threads, **options)
    it = iter(pipe)
    first = next(it)
    assert first["tokens"].shape == (MBS, SEQ)
    # The daemon's CPU over exactly the measured window (its own clock, ns resolution).
    daemon0 = zephon.daemon_status(socket)["process_cpu_s"]
    wall0, cpu0 = time.perf_counter(), time.process_time()
    for _ in range(batches):
        b = next(it)
        int(torch.as_tensor(b["tokens"]).sum())
    wall = time.perf_counter() - wall0
    trainer_cpu = time.process_time() - cpu0
    daemon_cpu = zephon.daemon_status(socket)["process_cpu_s"] - daemon0
    pipe.close()
    return {"wall_s": wall, "trainer_cpu_s": trainer_cpu, "batches": batches,
            "daemon_window_cpu_s": daemon_cpu,
            "trainer_peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}


def start_daemon(workdir: Path, threads: int) -> Daemon:
    return Daemon(workdir, extra_args=["--worker-threads", str(threads)])


def peak_rss_kib(d: Daemon) -> int:
    return int(d.status()["peak_rss_bytes"]) // 1024


def child(kind: str, args: dict) -> dict:
    """Runs one measurement in a fresh interpreter so rusage is per configuration."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2] / "client" / "python")
    out = subprocess.run([sys.executable, __file__, "--child", kind, json.dumps(args)],
                         env=env, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"{kind} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_zephon(workdir: Path, corpus: Path, threads: int, batches: int) -> dict:
    d = start_daemon(workdir / f"z{threads}", threads)
    try:
        r = child("zephon", {"corpus": str(corpus), "socket": d.socket, "threads": threads,
                             "batches": batches, "options": {}})
        r["loader_cpu_s"] = r.pop("daemon_window_cpu_s")
        r["loader_peak_kib"] = peak_rss_kib(d)
    finally:
        d.stop()
    return r


def bench_node(workdir: Path, corpus: Path, batches: int, shared: bool) -> dict:
    """4 ranks as 4 processes: 2 DP groups x 2 TP peers sharing an instance (shared), or
    4 per-rank pipelines (each its own instance, as if every rank ran its own loader)."""
    d = start_daemon(workdir / ("node-shared" if shared else "node-private"), threads=2)
    cpu0 = d.cpu_s()
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2] / "client" / "python")
    procs = []
    try:
        for rank in range(4):
            if shared:
                options = {"world_size": 4, "global_rank": rank, "dp_degree": 2,
                           "dp_group_id": rank // 2, "run_id": "node", "aggregate_dir": "/tmp"}
            else:
                options = {"run_id": f"private-{rank}"}
            args = {"corpus": str(corpus), "socket": d.socket, "threads": 2,
                    "batches": batches, "options": options}
            procs.append(subprocess.Popen([sys.executable, __file__, "--child", "zephon",
                                           json.dumps(args)], env=env, stdout=subprocess.PIPE,
                                          text=True))
        results = [json.loads(p.communicate(timeout=900)[0].strip().splitlines()[-1])
                   for p in procs]
        return {"trainer_cpu_s": sum(r["trainer_cpu_s"] for r in results),
                "daemon_cpu_s": d.cpu_s() - cpu0, "daemon_peak_kib": peak_rss_kib(d),
                "trainer_peak_kib": sum(r["trainer_peak_kib"] for r in results),
                "wall_s": max(r["wall_s"] for r in results), "batches": batches}
    finally:
        d.stop()


# ----------------------------------------------------------------------------------
def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--child", nargs=2)
    args = parser.parse_args()
    if args.child:
        kind, cfg = args.child[0], json.loads(args.child[1])
        if kind == "dataloader":
            r = run_dataloader(Path(cfg["corpus"]), cfg["workers"], cfg["batches"])
        else:
            r = run_zephon_rank(Path(cfg["corpus"]), cfg["socket"], cfg["threads"],
                                cfg["batches"], cfg["options"])
        print(json.dumps(r))
        return 0

    batches = 100 if args.quick else 400
    workdir = Path(tempfile.mkdtemp(prefix="zephon-loader-bench-"))
    corpus = make_corpus(workdir, 8000 if args.quick else 16000)
    cpu = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text()
                .splitlines() if l.startswith("model name")), "?")
    print(f"machine: {os.cpu_count()} CPUs ({cpu}), {platform.system()} {platform.release()}")
    print(f"command: PYTHONPATH=client/python /usr/bin/python3 tests/bench/loader_bench.py"
          f"{' --quick' if args.quick else ''}")
    print(f"job: {batches} batches of {MBS} x {SEQ} tokens after a warm-up batch; "
          f"Megatron corpus of {sum(p.stat().st_size for p in corpus.glob('*.bin')) // 2} "
          f"tokens\n")

    rows = []
    for workers in (0, 1, 2):
        r = child("dataloader", {"corpus": str(corpus), "workers": workers,
                                 "batches": batches})
        r["name"] = f"DataLoader num_workers={workers}"
        r["loader_cpu_s"] = r.pop("worker_cpu_s")
        r["loader_peak_kib"] = r.pop("worker_peak_kib")
        rows.append(r)
    for threads in (1, 2):
        r = bench_zephon(workdir, corpus, threads, batches)
        r["name"] = f"Zephon, {threads} worker thread{'s' if threads > 1 else ''}"
        rows.append(r)

    def tps(r):
        return r["batches"] * TOKENS_PER_BATCH / r["wall_s"]

    best = max((r for r in rows if r["name"].startswith("DataLoader")), key=tps)
    print("| setup | batches/s | Mtokens/s | vs best DataLoader | trainer CPU ms/batch | "
          "total CPU ms/batch | peak memory MiB (trainer + loader) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        total = r["trainer_cpu_s"] + r["loader_cpu_s"]
        print(f"| {r['name']} | {r['batches'] / r['wall_s']:.1f} | {tps(r) / 1e6:.2f} | "
              f"{tps(r) / tps(best):.2f}x | {1000 * r['trainer_cpu_s'] / r['batches']:.3f} | "
              f"{1000 * total / r['batches']:.3f} | "
              f"{(r['trainer_peak_kib'] + r['loader_peak_kib']) / 1024:.0f} "
              f"({r['trainer_peak_kib'] / 1024:.0f} + {r['loader_peak_kib'] / 1024:.0f}) |")
    zbest = max((r for r in rows if r["name"].startswith("Zephon")), key=tps)
    zmin_cpu = min(r["trainer_cpu_s"] / r["batches"] for r in rows if r["name"].startswith("Zephon"))
    print(f"\ngoal >= 5x best DataLoader tokens/s: {tps(zbest) / tps(best):.1f}x -> "
          f"{'met' if tps(zbest) >= 5 * tps(best) else 'NOT met'}")
    print(f"goal trainer CPU per batch < 0.3 ms: {1000 * zmin_cpu:.3f} ms -> "
          f"{'met' if zmin_cpu < 0.0003 else 'NOT met'}")

    node_batches = batches // 2
    shared = bench_node(workdir, corpus, node_batches, shared=True)
    private = bench_node(workdir, corpus, node_batches, shared=False)
    print(f"\nnode view: 4 rank processes x {node_batches} batches each")
    print("| setup | instances | daemon CPU s | trainers CPU s | total CPU s | "
          "daemon peak MiB | trainers peak MiB |")
    print("|---|---|---|---|---|---|---|")
    for name, n, r in (("2 DP groups x 2 TP peers (shared instances)", 2, shared),
                       ("4 per-rank pipelines", 4, private)):
        print(f"| {name} | {n} | {r['daemon_cpu_s']:.2f} | {r['trainer_cpu_s']:.2f} | "
              f"{r['daemon_cpu_s'] + r['trainer_cpu_s']:.2f} | {r['daemon_peak_kib'] / 1024:.0f} | "
              f"{r['trainer_peak_kib'] / 1024:.0f} |")
    print(f"shared / per-rank daemon CPU: "
          f"{shared['daemon_cpu_s'] / max(private['daemon_cpu_s'], 1e-9):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
