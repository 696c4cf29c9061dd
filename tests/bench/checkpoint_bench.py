"""Checkpoint rounds, restore and checkpoint size: one invocation, Markdown tables.

    PYTHONPATH=client/python /usr/bin/python3 tests/bench/checkpoint_bench.py [--quick]

1. Checkpoint round latency: N = 4, 16, 64, 256 ranks (Pipeline objects driven from
   threads of this process) spread round-robin over 4 zephond processes (own sockets, shm
   prefixes and peer ports: simulated nodes), canonical_replicas = 16, dp_degree = min(N, 16).
   Each round every rank takes one batch, then all call checkpoint() at once from a thread
   pool; a round's latency is the wall time from the first call to the last return.
2. Restore time-to-first-batch after 10^2, 10^4 and 10^6 batches of progress. The
   checkpoints are constructed: a real one taken early from a single-rank pipeline on a
   repeating dataset, decoded (32-byte header + protobuf CheckpointState), every lane moved
   to a flush-group boundary about that far into its stream, re-encoded with a fresh CRC.
   Timed: Pipeline(...).restore(bytes) + attach + first next(), against a fresh pipeline.
3. Merged checkpoint size vs canonical_replicas C = 1, 8, 64, 512 (one rank, dp = 1,
   checkpoint after C batches).
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import struct
import sys
import tempfile
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

import zephon

from zephon.corpus import synthetic_documents

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
import proto_modules  # noqa: E402  (protoc-generated modules of proto/*.proto)
from zephond_process import Daemon  # noqa: E402  (one zephond helper for tests and benches)

NUM_DAEMONS = 4
C_ROUNDS = 16          # canonical_replicas of the round-latency runs
CHUNK_SIZE = 16        # samples per work-source chunk
MAX_LENGTH = 33        # tokens per packed record
MICROBATCH = 2         # records per batch
FLUSH_EVERY = 8        # the spec's default flush_every_k_chunks
DOC_MIN, DOC_MAX = 10, 160


# ----------------------------------------------------------------------------------
# Daemons: the same shape as tests/e2e/conftest.py's Daemon (no pytest dependency).
def make_corpus(root: Path) -> Path:
    corpus = root / "corpus"
    corpus.mkdir(parents=True)
    docs = synthetic_documents(1200, seed=21, min_len=DOC_MIN, max_len=DOC_MAX)
    zephon.write_megatron_dataset(corpus / "a", docs[:600])
    zephon.write_megatron_dataset(corpus / "b", docs[600:])
    return corpus


def make_pipe(corpus: Path, socket: str, **options) -> zephon.Pipeline:
    ds = zephon.Dataset.from_path("web", str(corpus), fmt="megatron")
    ws = zephon.StaticMixtureWorkSource([ds], seed=5, chunk_size=CHUNK_SIZE,
                                        exhausted_policy="repeat")
    return (zephon.Pipeline(ws).pack_flat(max_length=MAX_LENGTH).batch(MICROBATCH)
            .options(daemon=socket, **options))


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in [0, 100])."""
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(np.ceil(q / 100 * len(s))) - 1))
    return s[k]


# ----------------------------------------------------------------------------------
# 1. Checkpoint round latency
def bench_rounds(corpus: Path, work: Path, world: int, rounds: int) -> dict:
    daemons = [Daemon(work / f"rounds-{world}" / f"node{i}") for i in range(NUM_DAEMONS)]
    agg = work / f"rounds-{world}" / "agg"
    run_id = f"bench{world}"
    dp = min(world, C_ROUNDS)
    peers = world // dp
    node_of = [r % NUM_DAEMONS for r in range(world)]

    def local_peers(r: int) -> int:  # ranks of r's DP group on r's node share one instance
        return sum(1 for q in range(world)
                   if q // peers == r // peers and node_of[q] == node_of[r])

    pipes = [make_pipe(corpus, daemons[node_of[r]].socket, world_size=world, global_rank=r,
                       dp_degree=dp, dp_group_id=r // peers, canonical_replicas=C_ROUNDS,
                       local_peers=local_peers(r), run_id=run_id, aggregate_dir=str(agg),
                       aggregate_timeout_s=120.0)
             for r in range(world)]
    iters: list = [None] * world
    pool = ThreadPoolExecutor(max_workers=world)

    def read_one(r: int) -> None:
        if iters[r] is None:
            iters[r] = iter(pipes[r])
        next(iters[r])

    def call(r: int):
        t0 = time.perf_counter()
        state = pipes[r].checkpoint()
        return t0, time.perf_counter(), state

    try:
        t_attach = time.perf_counter()
        list(pool.map(read_one, range(world)))  # attach every rank + first batch
        attach_s = time.perf_counter() - t_attach
        # What the Status probes themselves cost the daemons (subtracted below).
        probe = []
        for _ in range(5):
            cpu0 = sum(d.cpu_s() for d in daemons)
            probe.append(sum(d.cpu_s() for d in daemons) - cpu0)
        probe_cpu = statistics.median(probe)
        lat, spread, tail, sizes = [], [], [], []
        daemon_cpu = client_cpu = 0.0
        for _ in range(rounds):
            list(pool.map(read_one, range(world)))
            time.sleep(0.02)  # let the producers refill the slot just read
            cpu0, client0 = sum(d.cpu_s() for d in daemons), time.process_time()
            got = list(pool.map(call, range(world)))
            client_cpu += time.process_time() - client0
            daemon_cpu += sum(d.cpu_s() for d in daemons) - cpu0 - probe_cpu
            starts = [g[0] for g in got]
            ends = [g[1] for g in got]
            states = {g[2] for g in got}
            if len(states) != 1:
                raise RuntimeError(f"N={world}: ranks got different checkpoint bytes")
            lat.append(max(ends) - min(starts))
            spread.append(max(starts) - min(starts))
            tail.append(max(ends) - max(starts))
            sizes.append(len(got[0][2]))
        files = sorted((agg / run_id).glob("checkpoint-*"))
        if len(files) != rounds or files[-1].stat().st_size != sizes[-1]:
            raise RuntimeError(f"N={world}: expected {rounds} merged files of {sizes[-1]} "
                               f"bytes, found {[f.stat().st_size for f in files]}")
    finally:
        for p in pipes:
            p.close()
        pool.shutdown()
        for d in daemons:
            d.stop()
    return {"world": world, "dp": dp, "peers": peers, "rounds": rounds,
            "instances": len({(node_of[r], r // peers) for r in range(world)}),
            "p50": pct(lat, 50), "p99": pct(lat, 99), "max": max(lat),
            "spread_p50": pct(spread, 50), "tail_p50": pct(tail, 50),
            "size": sizes[-1], "size_first": sizes[0], "attach_s": attach_s,
            "daemon_cpu_per_round": daemon_cpu / rounds,
            "client_cpu_per_round": client_cpu / rounds}


def fsync_probe(directory: Path, size: int, reps: int = 20) -> float:
    """Median seconds for what the leader does to a merged file on disk: write a temp file,
    fsync it, rename it into place, fsync the directory."""
    directory.mkdir(parents=True, exist_ok=True)
    times = []
    for i in range(reps):
        t0 = time.perf_counter()
        tmp = directory / f"probe-{i}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, b"x" * size)
        os.fsync(fd)
        os.close(fd)
        os.rename(tmp, directory / f"probe-{i}")
        dfd = os.open(directory, os.O_RDONLY)
        os.fsync(dfd)
        os.close(dfd)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


# ----------------------------------------------------------------------------------
# Checkpoint codec: the 32-byte header (daemon/checkpoint/) around a CheckpointState,
# read and written with the modules protoc generates from proto/checkpoint.proto.
MAGIC = b"ZEPHCKPT"


def decode_header(blob: bytes) -> tuple[int, bytes]:
    magic, version, header_bytes, payload_bytes, crc, reserved = struct.unpack_from(
        "<8sIIQII", blob, 0)
    if magic != MAGIC or header_bytes != 32 or reserved != 0:
        raise ValueError("not a Zephon checkpoint")
    payload = blob[32:]
    if len(payload) != payload_bytes or zlib.crc32(payload) != crc:
        raise ValueError("checkpoint length or CRC mismatch")
    return version, payload


def encode_header(version: int, payload: bytes) -> bytes:
    return struct.pack("<8sIIQII", MAGIC, version, 32, len(payload), zlib.crc32(payload),
                       0) + payload


def decode_state(blob: bytes):
    """(header version, CheckpointState)."""
    version, payload = decode_header(blob)
    state = proto_modules.load().checkpoint.CheckpointState()
    state.ParseFromString(payload)
    return version, state


def advance_checkpoint(blob: bytes, lane_batches: int, lane_chunk: int) -> bytes:
    """Every lane at {next_batch_index: lane_batches, flush_group_chunk: lane_chunk,
    records_into_group: 0}; total_batches updated; fresh CRC."""
    if lane_chunk % FLUSH_EVERY:
        raise ValueError("lane_chunk must be a flush-group boundary")
    version, state = decode_state(blob)
    for lane in state.lanes:
        lane.next_batch_index = lane_batches
        lane.flush_group_chunk = lane_chunk
        lane.records_into_group = 0
    state.total_batches = lane_batches * len(state.lanes)
    return encode_header(version, state.SerializeToString(deterministic=True))


def summary(blob: bytes) -> dict:
    _, state = decode_state(blob)
    return {"lanes": [(lane.next_batch_index, lane.flush_group_chunk, lane.records_into_group)
                      for lane in state.lanes],
            "ranks": len(state.ranks), "total_batches": state.total_batches,
            "spec_bytes": state.spec.ByteSize() if state.HasField("spec") else 0}


# ----------------------------------------------------------------------------------
# 2. Restore time-to-first-batch
def bench_restore(corpus: Path, work: Path, progresses: list[int], reps: int) -> tuple:
    lanes = 4
    d = Daemon(work / "restore")
    try:
        p = make_pipe(corpus, d.socket, canonical_replicas=lanes)
        it = iter(p)
        for _ in range(3 * lanes):
            next(it)
        real = p.checkpoint()
        p.close()
        real_summary = summary(real)

        docs_mean = (DOC_MIN + DOC_MAX) / 2
        records_per_lane_chunk = CHUNK_SIZE * docs_mean / MAX_LENGTH

        def time_one(state: bytes | None) -> float:
            t0 = time.perf_counter()
            q = make_pipe(corpus, d.socket, canonical_replicas=lanes)
            if state is not None:
                q.restore(state)
            q.attach()
            b = next(iter(q))
            dt = time.perf_counter() - t0
            b.close()
            q.close()
            return dt

        time_one(None)  # warm the page cache and the daemon's dataset code paths
        rows = []
        cases = [("fresh pipeline (no restore)", None, None, None)]
        for k in progresses:
            per_lane = max(1, k // lanes)
            chunk = int(per_lane * MICROBATCH / records_per_lane_chunk)
            chunk -= chunk % FLUSH_EVERY
            cases.append((f"restore after {k:.0e} batches".replace("+0", ""), k, per_lane,
                          chunk))
        states = {}
        for name, k, per_lane, chunk in cases:
            states[name] = None if k is None else advance_checkpoint(real, per_lane, chunk)
        times = {name: [] for name, *_ in cases}
        for _ in range(reps):  # interleaved, so drift hits every case alike
            for name, *_ in cases:
                times[name].append(time_one(states[name]))
        for name, k, per_lane, chunk in cases:
            t = times[name]
            rows.append({"name": name, "k": k, "per_lane": per_lane, "chunk": chunk,
                         "median": statistics.median(t), "min": min(t), "max": max(t),
                         "bytes": len(states[name]) if states[name] else None})
        # A restored run continues with the right batch indices (sanity check).
        big = states[cases[-1][0]]
        q = make_pipe(corpus, d.socket, canonical_replicas=lanes).restore(big)
        first = next(iter(q))
        lane_index = (first.lane, first.lane_batch_index)
        first.close()
        q.close()
    finally:
        d.stop()
    return rows, real_summary, lanes, lane_index


# ----------------------------------------------------------------------------------
# 3. Merged checkpoint size vs canonical_replicas
def bench_sizes(corpus: Path, work: Path, cs: list[int]) -> list[dict]:
    d = Daemon(work / "sizes")
    rows = []
    try:
        for c in cs:
            p = make_pipe(corpus, d.socket, canonical_replicas=c, dp_degree=1, dp_group_id=0)
            it = iter(p)
            t0 = time.perf_counter()
            for _ in range(c):
                next(it)
            read_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            state = p.checkpoint()
            ckpt_s = time.perf_counter() - t0
            p.close()
            s = summary(state)
            rows.append({"c": c, "bytes": len(state), "lanes": len(s["lanes"]),
                         "total": s["total_batches"], "spec_bytes": s["spec_bytes"],
                         "ckpt_s": ckpt_s, "read_s": read_s})
    finally:
        d.stop()
    return rows


# ----------------------------------------------------------------------------------
def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="zephon-ckpt-bench-"))
    corpus = make_corpus(work)

    cpu = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text()
                .splitlines() if l.startswith("model name")), "?")
    print(f"machine: {os.cpu_count()} CPUs ({cpu}), {platform.system()} {platform.release()} "
          f"{platform.machine()}")
    print(f"date: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}")
    print(f"command: PYTHONPATH=client/python /usr/bin/python3 tests/bench/checkpoint_bench.py"
          f"{' --quick' if args.quick else ''}")
    print(f"job: Megatron corpus of 1200 documents ({DOC_MIN}-{DOC_MAX} tokens), "
          f"chunk_size={CHUNK_SIZE}, pack_flat(max_length={MAX_LENGTH}), "
          f"batch({MICROBATCH}), exhausted_policy=repeat\n")

    # 1.
    plan = ([(4, 5), (16, 5), (64, 5), (256, 3)] if args.quick
            else [(4, 100), (16, 100), (64, 100), (256, 50)])
    rows = [bench_rounds(corpus, work, n, r) for n, r in plan]
    print(f"### 1. Checkpoint round latency ({NUM_DAEMONS} zephond, canonical_replicas="
          f"{C_ROUNDS}, ranks = threads of one process)\n")
    print("| ranks | dp x peers | instances | rounds | p50 ms | p99 ms | max ms | "
          "call-start spread p50 ms | last call -> last return p50 ms | "
          "CPU ms / round: 4 daemons | CPU ms / round: ranks' process | merged file bytes |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['world']} | {r['dp']} x {r['peers']} | {r['instances']} | {r['rounds']} | "
              f"{1e3 * r['p50']:.1f} | {1e3 * r['p99']:.1f} | {1e3 * r['max']:.1f} | "
              f"{1e3 * r['spread_p50']:.1f} | {1e3 * r['tail_p50']:.1f} | "
              f"{1e3 * r['daemon_cpu_per_round']:.1f} | {1e3 * r['client_cpu_per_round']:.1f} | "
              f"{r['size']} |")
    probe = fsync_probe(work / "fsync-probe", rows[-1]["size"])
    attach = ", ".join(f"N={r['world']}: {r['attach_s']:.2f} s" for r in rows)
    print(f"\nLatency = first checkpoint() call to last return. Spread = first to last "
          f"call start (thread-pool dispatch under the GIL). CPU columns cover the "
          f"checkpoint phase only (daemons: net of the Status probes used to read it). p99 is nearest-rank (with < 100 rounds: the maximum). "
          f"Attach + first batch of all ranks took {attach}. For scale: writing a "
          f"{rows[-1]['size']}-byte file atomically with fsync of file and directory "
          f"(what the leader does per round) takes {1e3 * probe:.2f} ms (median of 20) on "
          f"the aggregate_dir's file system ({work}).\n")

    # 2.
    reps = 5 if args.quick else 9
    restore_rows, real, lanes, first = bench_restore(corpus, work, [10**2, 10**4, 10**6], reps)
    print(f"### 2. Restore time-to-first-batch (1 rank, canonical_replicas={lanes}; "
          f"median of {reps})\n")
    print(f"Real checkpoint taken after {real['total_batches']} batches: lanes "
          f"{real['lanes']} "
          f"(next_batch_index, flush_group_chunk, records_into_group). Constructed ones move "
          f"every lane to records_into_group=0 at the flush group shown.\n")
    print("| case | total batches | per lane next_batch_index | flush_group_chunk | "
          "checkpoint bytes | median ms | min ms | max ms | vs fresh |")
    print("|---|---|---|---|---|---|---|---|---|")
    base = restore_rows[0]["median"]
    for r in restore_rows:
        print(f"| {r['name']} | {r['k'] if r['k'] else '-'} | {r['per_lane'] or '-'} | "
              f"{r['chunk'] if r['chunk'] is not None else '-'} | {r['bytes'] or '-'} | "
              f"{1e3 * r['median']:.2f} | {1e3 * r['min']:.2f} | {1e3 * r['max']:.2f} | "
              f"{r['median'] / base:.2f}x |")
    print(f"\n(after restoring 10^6: first batch from lane {first[0]}, lane batch index "
          f"{first[1]})\n")

    # 3.
    sizes = bench_sizes(corpus, work, [1, 8, 64, 512])
    print("### 3. Merged checkpoint size vs canonical_replicas (1 rank, dp=1, after C batches)\n")
    print("| C | lanes | checkpoint bytes | bytes / lane (beyond C=1) | of which spec bytes | "
          "checkpoint() ms | reading C batches ms |")
    print("|---|---|---|---|---|---|---|")
    b1 = sizes[0]["bytes"]
    for r in sizes:
        per_lane = (r["bytes"] - b1) / (r["c"] - 1) if r["c"] > 1 else float("nan")
        print(f"| {r['c']} | {r['lanes']} | {r['bytes']} | "
              f"{'-' if r['c'] == 1 else f'{per_lane:.1f}'} | {r['spec_bytes']} | "
              f"{1e3 * r['ckpt_s']:.1f} | {1e3 * r['read_s']:.1f} |")
    print(f"\ntotal run time: {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
