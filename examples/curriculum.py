"""A two-phase data curriculum (web-heavy, then code-heavy annealing) run on 2 DP groups
through a checkpoint, resumed on 1 and on 4 DP groups across the phase boundary: every
global step after the checkpoint holds the same samples as the uninterrupted run.
Then the schedule's future is changed on resume (accepted, recorded in the checkpoint's
schedule_history) and its past (refused, naming the entry).

    PYTHONPATH=client/python python3 examples/curriculum.py [--socket PATH]

Without --socket a private zephond is started. Exits non-zero if a step differs.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

import zephon
from zephon.corpus import synthetic_documents

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from repro import start_daemon  # noqa: E402

C = 4            # canonical_replicas (lanes): a global step is one batch of every lane.
CHUNK = 16       # samples per chunk
BOUNDARY = 12    # the annealing phase starts at global chunk 12 (lane chunk 3 of each lane)
STEPS, SAVE_AT = 14, 3
PHASES = [(0, {"web": 0.9, "code": 0.1}), (BOUNDARY, {"web": 0.2, "code": 0.8})]


def make_data(root: str):
    os.makedirs(root, exist_ok=True)
    docs = synthetic_documents(3000, seed=7, min_len=8, max_len=40, vocab=500)
    zephon.write_megatron_dataset(os.path.join(root, "web"), docs[:2000])
    zephon.write_megatron_dataset(os.path.join(root, "code"), docs[2000:])
    return [zephon.Dataset.from_path(n, os.path.join(root, n), fmt="megatron")
            for n in ("web", "code")]


def pipeline(datasets, socket, rank, dp, run_id, agg, schedule=PHASES, restore=None):
    ws = zephon.ScheduledMixtureWorkSource(datasets, schedule=schedule, unit="chunks",
                                           chunk_size=CHUNK, seed=3,
                                           exhausted_policy="repeat")
    pipe = (zephon.Pipeline(ws).pack_flat(max_length=65).batch(2)
            .options(daemon=socket, world_size=dp, global_rank=rank, dp_degree=dp,
                     dp_group_id=rank, canonical_replicas=C, run_id=run_id,
                     # Small flush groups: a checkpoint's past (the chunks its lanes had
                     # started) ends soon after its position, so the future can change.
                     flush_every_k_chunks=1,
                     aggregate_dir=agg, aggregate_timeout_s=60))
    return pipe.restore(restore) if restore is not None else pipe


def run(datasets, socket, agg, dp, steps, run_id, *, save_at=None, restore=None,
        schedule=PHASES):
    """Per global step, the set of sample ids it holds; and the checkpoint at save_at."""
    pipes = [pipeline(datasets, socket, r, dp, run_id, agg, schedule, restore)
             for r in range(dp)]

    def rank_loop(r):
        it, out, ckpt = iter(pipes[r]), [], None
        for step in range(steps):
            ids = set()
            for _ in range(C // dp):  # this group's lanes' batches of the step
                ids |= {(i.dataset, i.shard, i.index) for i in next(it).ids}
            out.append(ids)
            if save_at is not None and step + 1 == save_at:
                ckpt = pipes[r].checkpoint()
        return out, ckpt

    with ThreadPoolExecutor(dp) as pool:
        results = list(pool.map(rank_loop, range(dp)))
    explain = pipes[0].explain()
    for p in pipes:
        p.close()
    step_sets = [set().union(*(res[0][s] for res in results)) for s in range(steps)]
    return step_sets, results[0][1], explain


def main(socket: str, work: str) -> int:
    datasets = make_data(os.path.join(work, "data"))
    agg = os.path.join(work, "agg")
    full, _, explain = run(datasets, socket, agg, 2, STEPS, "full")
    print("\n".join(l for l in explain.splitlines() if "curriculum" in l or "work source:" in l))
    for s, ids in enumerate(full):
        code = sum(1 for d, _, _ in ids if d == 1) / len(ids)
        print(f"step {s}: {len(ids)} samples, code share {code:.2f}")
    _, ckpt, _ = run(datasets, socket, agg, 2, SAVE_AT, "elastic", save_at=SAVE_AT)
    state = zephon.inspect_checkpoint(ckpt)
    print(f"checkpoint at step {SAVE_AT}: lanes at flush_group_chunk "
          f"{[l['flush_group_chunk'] for l in state['lanes']]}, boundary at chunk {BOUNDARY}")
    ok = True
    for dp in (1, 4):
        resumed, _, _ = run(datasets, socket, agg, dp, STEPS - SAVE_AT, "elastic",
                            restore=ckpt)
        same = resumed == full[SAVE_AT:]
        ok &= same
        print(f"resumed on dp_degree={dp} across the phase boundary: steps {SAVE_AT}.."
              f"{STEPS - 1} {'equal' if same else 'DIFFER'} to the uninterrupted run")
    # The future may change (annealing moved later); the past may not.
    later = [PHASES[0], (BOUNDARY + 8, PHASES[1][1])]
    resumed, ckpt2, _ = run(datasets, socket, agg, 2, 2, "elastic", restore=ckpt,
                            schedule=later, save_at=2)
    history = zephon.inspect_checkpoint(ckpt2)["schedule_history"]
    print(f"future change accepted: {len(history)} schedule revisions, the new one from "
          f"chunk {history[-1]['from_chunk']}")
    ok &= resumed[0] == full[SAVE_AT] and len(history) == 2
    past = [(0, {"web": 0.5, "code": 0.5}), PHASES[1]]
    try:
        run(datasets, socket, agg, 2, 1, "elastic", restore=ckpt, schedule=past)
        print("a changed past was NOT refused")
        ok = False
    except zephon.ZephonError as e:
        print(f"past change refused: {e}")
    return 0 if ok else 1


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--socket", help="a running zephond's socket (default: start one)")
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="zephon-curriculum-")
    daemon = None
    if args.socket is None:
        daemon, args.socket = start_daemon(work)
    try:
        sys.exit(main(args.socket, work))
    finally:
        if daemon is not None:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)
