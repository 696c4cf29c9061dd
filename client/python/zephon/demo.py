"""`make demo`: the walking skeleton end to end, with checks.

1. Writes a small Megatron-format corpus (two shards) with project code.
2. Starts a zephond on a private socket.
3. Runs 4 trainer ranks as separate processes: 2 DP groups x 2 peers
   (world_size=4, dp_degree=2, canonical_replicas=4). Prints a hash of each rank's batch
   per step, and the daemon's view: 2 pipeline instances for 4 ranks.
4. Runs the same steps with 1 and with 4 DP groups (4 batches per step in total).
5. Checks: peers identical, groups disjoint, 2 instances for 4 ranks, and every step
   holds the same set of samples for D = 1, 2 and 4. Exit status 0 only if all hold.

Run: ``PYTHONPATH=client/python /usr/bin/python3 -m zephon.demo`` (after ``make build``).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

if TYPE_CHECKING:
    import zephon

CANONICAL_REPLICAS = 4
STEPS = 6
BATCHES_PER_STEP = 4  # across all DP groups: a multiple of canonical_replicas
SEQ_LEN = 256
MICROBATCH = 4


def batch_hash(batch: "zephon.Batch") -> str:
    h = hashlib.sha256()
    h.update(batch["tokens"].tobytes())
    h.update(batch["positions"].tobytes())
    return h.hexdigest()[:12]


def build_pipeline(corpus: str, socket: str, world_size: int, global_rank: int, dp_degree: int,
                   dp_group_id: int, run_id: str, aggregate_dir: str) -> "zephon.Pipeline":
    import zephon
    ds = zephon.Dataset.from_path("demo", corpus, fmt="megatron")
    ws = zephon.StaticMixtureWorkSource([ds], seed=1234, chunk_size=64)
    return (zephon.Pipeline(ws)
            .pack_flat(max_length=SEQ_LEN + 1)
            .batch(MICROBATCH)
            .options(world_size=world_size, global_rank=global_rank, dp_degree=dp_degree,
                     dp_group_id=dp_group_id, canonical_replicas=CANONICAL_REPLICAS,
                     run_id=run_id, aggregate_dir=aggregate_dir, daemon=socket))


def run_rank(cfg: dict[str, Any]) -> dict[str, Any]:
    """One trainer rank: reads `steps` x `per_step` batches and records them."""
    pipe = build_pipeline(cfg["corpus"], cfg["socket"], cfg["world_size"], cfg["global_rank"],
                          cfg["dp_degree"], cfg["dp_group_id"], cfg["run_id"], cfg["agg"])
    pipe.attach()
    barrier = cfg.get("barrier")
    if barrier:
        Path(barrier, f"attached.{cfg['global_rank']}").touch()
        deadline = time.monotonic() + 60
        while not Path(barrier, "go").exists():
            if time.monotonic() > deadline:
                raise TimeoutError("demo: no go signal within 60 s")
            time.sleep(0.02)
    steps = []
    it = iter(pipe)
    for _ in range(cfg["steps"]):
        step = []
        for _ in range(cfg["per_step"]):
            batch = next(it)
            step.append({"hash": batch_hash(batch), "lane": batch.lane,
                         "lane_batch": batch.lane_batch_index,
                         "ids": [list(i) for i in batch.ids]})
        steps.append(step)
    result = {"rank": cfg["global_rank"], "group": cfg["dp_group_id"],
              "instance": pipe.attach_info["instance_id"], "steps": steps}
    pipe.close()
    return result


def launch_ranks(python: str, configs: list[dict[str, Any]],
                 workdir: Path) -> list[subprocess.Popen[bytes]]:
    procs = []
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1]) + os.pathsep + \
        env.get("PYTHONPATH", "")
    for cfg in configs:
        cfg_path = workdir / f"rank-{cfg['run_id']}-{cfg['global_rank']}.json"
        cfg_path.write_text(json.dumps(cfg))
        procs.append(subprocess.Popen([python, "-m", "zephon.demo", "--worker", str(cfg_path)],
                                      env=env))
    return procs


def wait_all(procs: list[subprocess.Popen[bytes]], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    for p in procs:
        p.wait(timeout=max(1, deadline - time.monotonic()))
        if p.returncode != 0:
            raise RuntimeError(f"a trainer rank exited with status {p.returncode}")


def run_topology(python: str, workdir: Path, corpus: str, socket: str, dp_degree: int,
                 peers: int, barrier: Path | None = None,
                 on_attached: Optional[Callable[[], None]] = None) -> list[dict[str, Any]]:
    world = dp_degree * peers
    run_id = f"demo-d{dp_degree}"
    configs: list[dict[str, Any]] = []
    for rank in range(world):
        configs.append({"corpus": corpus, "socket": socket, "world_size": world,
                        "global_rank": rank, "dp_degree": dp_degree,
                        "dp_group_id": rank // peers, "run_id": run_id,
                        "agg": str(workdir / "agg"), "steps": STEPS,
                        "per_step": BATCHES_PER_STEP // dp_degree,
                        "barrier": str(barrier) if barrier else None,
                        "out": str(workdir / f"out-{run_id}-{rank}.json")})
    procs = launch_ranks(python, configs, workdir)
    try:
        if barrier is not None:
            deadline = time.monotonic() + 60
            while len(list(barrier.glob("attached.*"))) < world:
                if time.monotonic() > deadline or any(p.poll() not in (None, 0) for p in procs):
                    raise RuntimeError("demo: ranks did not all attach")
                time.sleep(0.02)
            if on_attached:
                on_attached()
            (barrier / "go").touch()
        wait_all(procs)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return [json.loads(Path(c["out"]).read_text()) for c in configs]


def step_sample_sets(results: list[dict[str, Any]],
                     peers: int) -> list[frozenset[tuple[int, ...]]]:
    """Per step, the set of sample ids taken across DP groups (one rank per group)."""
    leaders = [r for r in results if r["rank"] % peers == 0]
    sets = []
    for s in range(STEPS):
        ids: set[tuple[int, ...]] = set()
        for r in leaders:
            for b in r["steps"][s]:
                ids.update(tuple(i) for i in b["ids"])
        sets.append(frozenset(ids))
    return sets


def main() -> int:
    import numpy as np
    import zephon
    from zephon.corpus import synthetic_documents

    python = sys.executable
    workdir = Path(tempfile.mkdtemp(prefix="zephon-demo-"))
    corpus = workdir / "corpus"
    corpus.mkdir()
    docs = synthetic_documents(3000, seed=7)
    zephon.write_megatron_dataset(corpus / "shard-00000", docs[:1500], dtype=np.uint16)
    zephon.write_megatron_dataset(corpus / "shard-00001", docs[1500:], dtype=np.uint16)
    print(f"corpus: {len(docs)} documents, {sum(len(d) for d in docs)} tokens in 2 Megatron "
          f"shards under {corpus}")

    socket = str(workdir / "zephond.sock")
    zephond = zephon._native.zephond_path()
    if zephond is None:
        print("zephond binary not found; run `make build`", file=sys.stderr)
        return 1
    daemon = subprocess.Popen([zephond, "--socket", socket, "--log-file", str(workdir / "zephond.log")])
    ok = True
    try:
        deadline = time.monotonic() + 15
        while not os.path.exists(socket):
            if time.monotonic() > deadline or daemon.poll() is not None:
                print("zephond did not start; see", workdir / "zephond.log", file=sys.stderr)
                return 1
            time.sleep(0.05)

        print(f"\n== 4 trainer ranks: 2 DP groups x 2 peers, canonical_replicas="
              f"{CANONICAL_REPLICAS}, {BATCHES_PER_STEP} batches per step ==")
        barrier = workdir / "barrier"
        barrier.mkdir()
        seen: dict[str, Any] = {}

        def snapshot() -> None:
            seen["status"] = zephon.daemon_status(socket)

        results = run_topology(python, workdir, str(corpus), socket, dp_degree=2, peers=2,
                               barrier=barrier, on_attached=snapshot)
        by_rank = {r["rank"]: r for r in results}
        print("step | " + " | ".join(f"rank{r} (dp{by_rank[r]['group']})" for r in range(4)))
        for s in range(STEPS):
            cells = [",".join(b["hash"] for b in by_rank[r]["steps"][s]) for r in range(4)]
            print(f"{s:4d} | " + " | ".join(cells))

        peers_identical = (by_rank[0]["steps"] == by_rank[1]["steps"] and
                           by_rank[2]["steps"] == by_rank[3]["steps"])
        ids_g0 = {tuple(i) for st in by_rank[0]["steps"] for b in st for i in b["ids"]}
        ids_g1 = {tuple(i) for st in by_rank[2]["steps"] for b in st for i in b["ids"]}
        disjoint = not (ids_g0 & ids_g1)
        instances = seen["status"].get("instances", [])
        readers = sum(1 for inst in instances for rd in inst.get("readers", [])
                      if rd.get("state") == "attached")
        print(f"\ndaemon while the 4 ranks were attached: {len(instances)} pipeline instances, "
              f"{readers} attached readers")
        for inst in instances:
            print(f"  {inst['instance_id']}: lanes {inst.get('owned_lanes')} ring "
                  f"{inst['ring_name']} ({int(inst['ring_bytes']) // 1024} KiB)")
        print(f"peers identical (rank0==rank1, rank2==rank3): {peers_identical}")
        print(f"DP groups disjoint ({len(ids_g0)} vs {len(ids_g1)} samples, "
              f"{len(ids_g0 & ids_g1)} shared): {disjoint}")
        two_instances = len(instances) == 2 and readers == 4
        print(f"2 instances serve 4 ranks: {two_instances}")
        ok = peers_identical and disjoint and two_instances

        sets = {2: step_sample_sets(results, peers=2)}
        for dp in (1, 4):
            print(f"\n== same steps with {dp} DP group(s) ==")
            res = run_topology(python, workdir, str(corpus), socket, dp_degree=dp, peers=1)
            sets[dp] = step_sample_sets(res, peers=1)
        print("\nstep | samples | same set for D=1, D=2, D=4")
        for s in range(STEPS):
            same = sets[1][s] == sets[2][s] == sets[4][s]
            digest = hashlib.sha256(repr(sorted(sets[1][s])).encode()).hexdigest()[:12]
            print(f"{s:4d} | {len(sets[1][s]):7d} | {same} ({digest})")
            ok = ok and same
    finally:
        daemon.send_signal(signal.SIGTERM)
        try:
            rc = daemon.wait(timeout=15)
        except subprocess.TimeoutExpired:
            daemon.kill()
            rc = -9
        if rc != 0:
            print(f"zephond exited with status {rc}", file=sys.stderr)
            ok = False
    print("\nDEMO", "PASSED" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", help="(internal) run one trainer rank from a JSON config")
    args = parser.parse_args()
    if args.worker:
        cfg = json.loads(Path(args.worker).read_text())
        Path(cfg["out"]).write_text(json.dumps(run_rank(cfg)))
        sys.exit(0)
    sys.exit(main())
