"""Data curricula through the daemon (ScheduledMixtureWorkSource): each phase draws its
weights (a weight 0 draws nothing), explain shows the phase, the refusals name the
entry, the README's curriculum block runs, and examples/curriculum.py resumes a
two-phase run on another dp_degree across the boundary with equal per-step samples,
accepts a changed future (recorded) and refuses a changed past."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import zephon
from readme_blocks import run_readme_block

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def three_sets(tmp_path):
    out = []
    for k, name in enumerate(("web", "code", "math")):
        zephon.write_megatron_dataset(tmp_path / name,
                                      [np.full(8, 100 * k + i % 90 + 1) for i in range(300)])
        out.append(zephon.Dataset.from_path(name, str(tmp_path / name), fmt="megatron"))
    return out


def drawn(ws, socket, run_id, batches=None):
    pipe = (zephon.Pipeline(ws).pack_flat(max_length=16).batch(1)
            .options(daemon=socket, run_id=run_id, canonical_replicas=1))
    out = []
    for n, b in enumerate(pipe):
        out += [i.dataset for i in b.ids]
        if batches is not None and n + 1 == batches:
            break
    explain = pipe.explain()
    pipe.close()
    return out, explain


@pytest.mark.parametrize("unit,boundary", [("chunks", 5), ("samples", 41)])
def test_each_phase_draws_its_weights(daemon, three_sets, unit, boundary):
    # chunk_size 10: chunks 0-4 web/code 1:1, math 0; from chunk 5 (sample 41 -> chunk
    # ceil(4.1) = 5) only math.
    ws = zephon.ScheduledMixtureWorkSource(
        three_sets, unit=unit, chunk_size=10, exhausted_policy="repeat",
        schedule=[(0, {"web": 1, "code": 1}), (boundary, {"math": 1})])
    ids, explain = drawn(ws, daemon.socket, f"phases-{unit}", batches=50)
    assert ids[:50].count(0) == 25 and ids[:50].count(1) == 25
    assert set(ids[50:100]) == {2}
    assert re.search(r"curriculum: phase 1 of 2 \(from chunk 5, step\), weights web 0, "
                     r"code 0, math 1", explain), explain
    assert "ScheduledMixture[" in explain and "schedule=[0:(0.5,0.5,0), 5:(0,0,1)]" in explain


def test_phase_reaches_status_and_metrics(tmp_path, three_sets):
    """InstanceStatus.curriculum and zephon_curriculum_* say where the curriculum stands
    (the phase of the furthest chunk the instance's lanes reached), before and after the
    phase boundary."""
    import urllib.request

    from conftest import Daemon

    d = Daemon(tmp_path / "d", ["--metrics-address", "127.0.0.1:0"])
    try:
        ws = zephon.ScheduledMixtureWorkSource(
            three_sets, unit="chunks", chunk_size=10, exhausted_policy="repeat",
            schedule=[(0, {"web": 1, "code": 1}), (5, {"math": 1})])
        pipe = (zephon.Pipeline(ws).pack_flat(max_length=16).batch(1)
                .options(daemon=d.socket, run_id="cur-status", canonical_replicas=1,
                         flush_every_k_chunks=1))
        it = iter(pipe)
        next(it)
        first = zephon.daemon_status(d.socket)["instances"][0]["curriculum"]
        assert int(first.get("phase", 0)) == 0 and int(first["phases"]) == 2
        assert first["interpolate"] == "step"
        assert {w["dataset"]: w.get("weight", 0) for w in first["weights"]} == \
            {"web": 0.5, "code": 0.5, "math": 0}
        for _ in range(70):  # 8-token samples, 2 per batch: chunk 5 starts at batch 25
            next(it)
        later = zephon.daemon_status(d.socket)["instances"][0]["curriculum"]
        assert int(later["phase"]) == 1 and int(later["phase_start_chunk"]) == 5
        assert int(later["chunk"]) >= 5
        address = zephon.daemon_status(d.socket)["metrics_address"]
        with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as r:
            text = r.read().decode()
        assert re.search(r'^zephon_curriculum_phase\{[^}]*run="cur-status"[^}]*\} 1$', text,
                         re.M), text
        assert re.search(r'^zephon_curriculum_weight\{[^}]*dataset="math"[^}]*\} 1$', text,
                         re.M), text
        pipe.close()
    finally:
        rc = d.stop()
    assert rc == 0, d.log.read_text()


def test_schedule_and_microbatch_change_together_on_resume(daemon, three_sets):
    """A checkpoint taken with microbatch 2 resumes with microbatch 1 and a changed
    schedule future at once: the rows are those of a fresh run with the new schedule
    (its past is the old one's), and the history records the revision; a changed past
    with a changed microbatch is still refused naming the entry."""
    old = [(0, {"web": 1, "code": 1}), (40, {"math": 1})]
    new = [(0, {"web": 1, "code": 1}), (40, {"code": 1, "math": 1})]

    def pipe(schedule, microbatch, run_id, restore=None):
        ws = zephon.ScheduledMixtureWorkSource(three_sets, unit="chunks", chunk_size=10,
                                               exhausted_policy="repeat", schedule=schedule)
        p = (zephon.Pipeline(ws).pack_flat(max_length=16).batch(microbatch)
             .options(daemon=daemon.socket, run_id=run_id, canonical_replicas=1))
        return p.restore(restore) if restore is not None else p

    def rows(p, batches):
        out = []
        for _, b in zip(range(batches), p):
            out += [tuple(r) for r in np.array(b["tokens"]).tolist()]
        return out

    first = pipe(old, 2, "mb2")
    it = iter(first)
    for _ in range(5):  # 10 rows of 2 samples: chunks 0..1, far from chunk 40
        next(it)
    state = first.checkpoint()
    first.close()
    reference = pipe(new, 1, "fresh")
    want = rows(reference, 10 + 400)[10:]  # through the new phase (chunk 40 = row 200)
    reference.close()
    resumed = pipe(new, 1, "mb2", restore=state)
    got = rows(resumed, 400)
    after = resumed.checkpoint()
    resumed.close()
    assert got == want
    history = zephon.inspect_checkpoint(after)["schedule_history"]
    assert len(history) == 2, history
    past = [(0, {"web": 1}), (40, {"math": 1})]
    with pytest.raises(zephon.errors.ZephonError,
                       match=r"work_source.schedule\[0\] \(starting at chunk 0\) differs"):
        pipe(past, 1, "mb2", restore=state).attach()


def test_linear_ramp_moves_the_share_chunk_by_chunk(daemon, three_sets):
    ws = zephon.ScheduledMixtureWorkSource(
        three_sets[:2], unit="chunks", chunk_size=20, interpolate="linear",
        exhausted_policy="repeat", schedule=[(0, [1, 0]), (10, [0, 1])])
    ids, _ = drawn(ws, daemon.socket, "linear", batches=120)
    # Chunk g holds 2g samples of "code" (20 g / 10), exactly.
    for g in range(10):
        assert ids[20 * g:20 * (g + 1)].count(1) == 2 * g, g
    assert set(ids[200:]) == {1}


def test_refusals_name_the_entry(daemon, three_sets):
    with pytest.raises(ValueError, match=r"schedule\[0\] starts at 5: the first entry"):
        zephon.ScheduledMixtureWorkSource(three_sets, schedule=[(5, [1, 1, 1])])
    with pytest.raises(ValueError, match=r"schedule\[1\] names unknown datasets \['books'\]"):
        zephon.ScheduledMixtureWorkSource(three_sets, schedule=[(0, [1, 1, 1]),
                                                                (9, {"books": 1})])
    with pytest.raises(ValueError, match=r"schedule\[2\] starts at 9, not after "
                                         r"schedule\[1\]'s 9"):
        zephon.ScheduledMixtureWorkSource(three_sets, schedule=[(0, [1, 1, 1]), (9, [1, 0, 0]),
                                                                (9, [0, 1, 0])])
    with pytest.raises(ValueError, match=r"schedule\[1\] gives every dataset weight 0"):
        zephon.ScheduledMixtureWorkSource(three_sets, schedule=[(0, [1, 1, 1]), (9, {})])
    with pytest.raises(ValueError, match=r"takes no mixture="):
        zephon.ScheduledMixtureWorkSource(three_sets, schedule=[(0, [1, 1, 1])],
                                          mixture=[1, 1, 1])
    with pytest.raises(ValueError, match=r"interpolate='cubic' is not supported"):
        zephon.ScheduledMixtureWorkSource(three_sets, schedule=[(0, [1, 1, 1])],
                                          interpolate="cubic")
    # Samples 11 and 20 are both chunk 2 at chunk_size 10: refused before attach, as
    # zephond refuses it (phase_schedule_test: RefusalsNameTheEntry).
    with pytest.raises(ValueError, match=r"schedule\[2\] \(sample 20\) starts in the same "
                                         r"chunk 2 as schedule\[1\]"):
        zephon.ScheduledMixtureWorkSource(three_sets, chunk_size=10, schedule=[
            (0, [1, 1, 1]), (11, [1, 0, 0]), (20, [0, 1, 0])])
    with pytest.raises(ValueError, match=r"chunk_size=2 is smaller than the 3 datasets"):
        zephon.ScheduledMixtureWorkSource(three_sets, chunk_size=2, schedule=[(0, [1, 1, 1])])


def test_readme_curriculum_block_runs(tmp_path):
    stdout = run_readme_block("ScheduledMixtureWorkSource", tmp_path)
    assert stdout.startswith("curriculum: phase 1 of 2"), stdout


def test_example_resumes_across_the_boundary_on_another_dp_degree(daemon):
    env = dict(os.environ, PYTHONPATH=str(REPO / "client" / "python"))
    out = subprocess.run([sys.executable, str(REPO / "examples" / "curriculum.py"), "--socket",
                          daemon.socket], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    for dp in (1, 4):
        assert re.search(rf"resumed on dp_degree={dp} across the phase boundary: steps \d+\.\.\d+ "
                         r"equal", out.stdout), out.stdout
    assert "future change accepted: 2 schedule revisions" in out.stdout
    assert re.search(r"past change refused: .*work_source.schedule\[0\] \(starting at chunk 0\) "
                     r"differs", out.stdout), out.stdout
