"""The audit log and `zephonctl audit` (issue 19): a run checkpointed and resumed on
another dp_degree publishes, step for step, what an uninterrupted run publishes; a run
over a corpus with one document changed is caught at the exact step that first holds
it; `audit verify` proves a run's batches are its spec's. Real zephond; ranks are
Pipeline objects driven from threads, as in test_resume_changes.py."""
from __future__ import annotations

import json
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import zephon
from zephon.corpus import synthetic_documents
from zephond_process import zephonctl_path

C = 4  # lanes
DOCS = synthetic_documents(600, seed=5, min_len=10, max_len=90)


def make_pipe(corpus: Path, socket: str, agg: Path, run_id: str, *, dp=1, group=0,
              restore=None, audit=True):
    ds = zephon.Dataset.from_path("web", str(corpus), fmt="megatron")
    ws = zephon.StaticMixtureWorkSource([ds], seed=7, chunk_size=8, shuffle_within_shard=True,
                                        exhausted_policy="repeat")
    pipe = (zephon.Pipeline(ws).shuffle(buffer_size=8, seed=3).pack_flat(max_length=33)
            .batch(2)
            .options(daemon=socket, world_size=dp, global_rank=group, dp_degree=dp,
                     dp_group_id=group, run_id=run_id, aggregate_dir=str(agg),
                     canonical_replicas=C, audit=audit))
    return pipe.restore(restore) if restore is not None else pipe


def read_steps(pipes, steps) -> list[set]:
    """`steps` steps of C batches (C/dp per rank): each step's sample ids."""
    its = [iter(p) for p in pipes]
    out = []
    for _ in range(steps):
        ids = set()
        for it in its:
            for _ in range(C // len(pipes)):
                b = next(it)
                ids.update(tuple(x) for x in b.ids)
                b.close()
        out.append(ids)
    return out


def checkpoint_all(pipes) -> bytes:
    with ThreadPoolExecutor(len(pipes)) as pool:
        states = list(pool.map(lambda p: p.checkpoint(), pipes))
    return states[0]


def ctl(*args) -> subprocess.CompletedProcess:
    return subprocess.run([zephonctl_path(), "audit", *map(str, args)], capture_output=True,
                          text=True, timeout=300)


def wait_merged(run_dir: Path, lane_rounds: int) -> Path:
    """The leader's per-lane-round file of a run once it holds `lane_rounds` entries (the
    merge runs on a thread of its own after the checkpoint round)."""
    steps_file = run_dir / "audit" / "steps.zsteps"
    deadline = time.monotonic() + 30
    size = 28 + lane_rounds * (40 + 16 * C)  # header, then per lane round: j, digest, starts
    while not (steps_file.exists() and steps_file.stat().st_size >= size):
        assert time.monotonic() < deadline, f"the leader did not merge {run_dir}'s audit logs"
        time.sleep(0.05)
    assert steps_file.stat().st_size == size
    return steps_file


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("audit-corpus")
    zephon.write_megatron_dataset(root / "a", DOCS)
    return root


def test_a_resumed_run_matches_an_uninterrupted_one_and_a_changed_file_is_caught(
        corpus, daemon, tmp_path):
    agg = tmp_path / "agg"
    # Run A: 3 steps on dp_degree 2, a checkpoint, then 3 more on dp_degree 4.
    first = [make_pipe(corpus, daemon.socket, agg, "a", dp=2, group=g) for g in range(2)]
    read_steps(first, 3)
    state = checkpoint_all(first)
    # The leader merges the run's logs per lane round at the round (on a thread of its
    # own): lane rounds 0-2, the three steps before the checkpoint.
    steps_file = wait_merged(agg / "a", 3)
    assert steps_file.read_bytes()[:8] == b"ZSTEPS02"
    for p in first:
        p.close()
    resumed = [make_pipe(corpus, daemon.socket, agg, "a", dp=4, group=g, restore=state)
               for g in range(4)]
    read_steps(resumed, 3)
    for p in resumed:
        p.close()
    # Run B: the same 6 steps in one go on one rank.
    ref = make_pipe(corpus, daemon.socket, agg, "b")
    b_steps = read_steps([ref], 6)
    ref.checkpoint()
    ref.close()

    out = ctl("diff", agg / "a", agg / "b")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "no difference" in out.stdout
    wait_merged(agg / "b", 6)
    report = json.loads(ctl("diff", agg / "a", agg / "b", "--json").stdout)
    assert report["steps_compared"] >= 6 and report["first_difference"] is None
    assert report["merged_lane_rounds"] == [3, 6]
    assert report["merged_first_differing_lane_round"] is None
    assert report["first_step"] == 0

    # Run C: the corpus with one document's tokens changed (same length, so the order,
    # the packing and the spec hash are the same). Pick a document that step 3 is the
    # first to hold.
    first_seen = {}
    for n, ids in enumerate(b_steps):
        for key in ids:
            first_seen.setdefault(key, n)
    doc = min(i for (d, s, i), n in first_seen.items() if n == 3)
    changed = tmp_path / "changed"
    changed.mkdir()
    docs = [d.copy() for d in DOCS]
    docs[doc] = (docs[doc] + 1) % 50000
    zephon.write_megatron_dataset(changed / "a", docs)
    other = make_pipe(changed, daemon.socket, agg, "c")
    read_steps([other], 6)
    other.checkpoint()
    other.close()
    wait_merged(agg / "c", 6)

    out = ctl("diff", agg / "b", agg / "c")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "first difference at step 3:" in out.stdout, out.stdout
    report = json.loads(ctl("diff", agg / "b", agg / "c", "--json").stdout)
    diff = report["first_difference"]
    assert diff["step"] == 3
    assert diff["a_sha256"] != diff["b_sha256"]
    # The samples are the same (same lengths); only the tokens of the changed one differ.
    assert diff["only_in_a"] == [] and diff["only_in_b"] == []
    assert report["merged_first_differing_lane_round"] == 3  # one batch per lane a step
    # --steps before the change: nothing differs.
    assert ctl("diff", agg / "b", agg / "c", "--steps", "0:3").returncode == 0

    # verify: B is what its spec says; C's tokens are not the original corpus's.
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(make_pipe(corpus, daemon.socket, agg, "x")._request()))
    # which --audit: the run's merged lane rounds (steps 0-5, one read each) or, past
    # them, every batch its logs record, anchor the answer; it is the same answer.
    for step in (4, 6):
        plain = subprocess.run([zephonctl_path(), "which", "--spec", str(spec), "--step",
                                str(step), "--json", "--count-from-start"],
                               capture_output=True, text=True, timeout=60)
        anchored = subprocess.run([zephonctl_path(), "which", "--spec", str(spec), "--step",
                                   str(step), "--json", "--count-from-start", "--audit",
                                   str(agg / "b")],
                                  capture_output=True, text=True, timeout=60)
        assert plain.returncode == 0 and anchored.returncode == 0, anchored.stderr
        plain_answer, audit_answer = json.loads(plain.stdout), json.loads(anchored.stdout)
        assert plain_answer.pop("anchors") == 0 and audit_answer.pop("anchors") > 0
        assert audit_answer == plain_answer
    wrong = subprocess.run([zephonctl_path(), "which", "--spec", str(spec), "--step", "1",
                            "--audit", str(tmp_path)], capture_output=True, text=True,
                           timeout=60)
    assert wrong.returncode != 0 and "no audit log" in wrong.stderr
    ok = ctl("verify", agg / "b", "--spec", spec)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.startswith("verified ")
    bad = ctl("verify", agg / "c", "--spec", spec)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "are not the spec's" in bad.stdout
    # And A, verified against the checkpoint it resumed from.
    ckpt = tmp_path / "ckpt.bin"
    ckpt.write_bytes(state)
    assert ctl("verify", agg / "a", "--spec", ckpt).returncode == 0


def test_audit_refusals_name_the_fix(corpus, daemon, tmp_path):
    ds = zephon.Dataset.from_path("web", str(corpus), fmt="megatron")
    p = (zephon.Pipeline(zephon.StaticMixtureWorkSource([ds], chunk_size=8))
         .pack_flat(max_length=33).batch(2).options(daemon=daemon.socket, audit=True))
    with pytest.raises(zephon.InvalidOptionError, match="audit=True needs aggregate_dir"):
        p.attach()
    p.close()
    out = ctl("diff", tmp_path, tmp_path)
    assert out.returncode == 1
    assert "no audit log" in out.stderr and "audit=True" in out.stderr
    out = ctl("diff", tmp_path, tmp_path, "--steps", "5:2")
    assert out.returncode == 2 and "--steps 5:2" in out.stderr
