"""The engine guarantees test_checkpoint.py checks on Megatron data, as pytest tests over
any format's dataset, so tests/parquet and tests/mds hold record formats to the same ones
with real zephond processes: the same samples per global step whatever the DP degree,
elastic resume across DP degrees, TP peers given byte-identical batches, and a restore
refused when the dataset's field or files changed.

A test module subclasses EngineGuarantees (as class Test...) and provides the `data`
fixture (a folder of test files) and test_checkpoint.py's `nodes` fixture (nodes(n)
starts n daemons)."""
from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import zephon
from test_checkpoint import C, STEPS, Job, make_pipe, reference_steps


def check_steps_equal_across_dp(dataset, nodes, agg) -> None:
    """Every global step holds the same samples for dp_degree 1, 2 and 4."""
    want = reference_steps(dataset, nodes, agg)
    assert len(set(map(frozenset, want))) == STEPS, "steps must differ for this to mean much"
    daemons = nodes(2)
    for dp in (2, 4):
        job = Job(dataset, daemons, dp=dp, peers=1, run_id=f"dp{dp}", agg=agg)
        got = [job.step() for _ in range(STEPS)]
        job.close()
        assert got == want, f"dp_degree={dp}"


def check_resume_across_dp(dataset, nodes, agg) -> None:
    """Checkpoint on dp_degree 2 (TP peers on two daemons, which Job.step checks agree),
    restore on fresh daemons at dp_degree 1 and 4: the later steps are those of the
    uninterrupted dp_degree 1 run."""
    want = reference_steps(dataset, nodes, agg)
    job = Job(dataset, nodes(2), dp=2, peers=2, run_id="resume", agg=agg)
    for s in range(3):
        assert job.step() == want[s], f"step {s}"
    states = job.checkpoint()
    assert all(s == states[0] for s in states), "every rank gets the same checkpoint bytes"
    job.close()
    for dp, peers in ((1, 1), (4, 1)):
        resumed = Job(dataset, nodes(2), dp=dp, peers=peers, run_id="resume", agg=agg,
                      restore=states[0])
        got = [resumed.step() for _ in range(3, STEPS)]
        resumed.close()
        assert got == want[3:], f"restored on dp_degree={dp} with {peers} peers"


def check_peers_byte_identical(dataset, nodes, agg, batches: int = 24) -> None:
    """Two ranks of one DP group (TP peers), each on its own daemon, get byte-identical
    batches: every tensor and the sample ids."""
    daemons = nodes(2)
    pipes = [make_pipe(dataset, daemons[r].socket, world=2, rank=r, dp=1, group=0,
                       run_id="peers", agg=agg, canonical_replicas=C, local_peers=1)
             for r in range(2)]

    def read(pipe) -> list[dict]:
        out = []
        for _, b in zip(range(batches), pipe):
            fields = {k: np.ascontiguousarray(b[k]).tobytes() for k in b.keys()}
            fields["ids"] = repr(b.ids)
            out.append(fields)
        return out

    with ThreadPoolExecutor(2) as pool:
        got = list(pool.map(read, pipes))
    for p in pipes:
        p.close()
    assert len(got[0]) == batches and "tokens" in got[0][0]
    for i, (a, b) in enumerate(zip(*got)):
        assert a == b, f"batch {i}: the peers' batches differ"
    assert len({g["tokens"] for g in got[0]}) > batches // 2, "batches must differ"


def checkpoint_of(dataset, daemon, agg, run_id: str) -> bytes:
    """A checkpoint after one step of a dp_degree 2 job over `dataset`."""
    job = Job(dataset, [daemon], dp=2, peers=1, run_id=run_id, agg=agg)
    job.step()
    state = job.checkpoint()[0]
    job.close()
    return state


def check_restore_refused(dataset, state: bytes, daemon, agg, run_id: str, match: str) -> None:
    """Restoring `state` (checkpoint_of's) over `dataset` is refused with `match`."""
    pipe = make_pipe(dataset, daemon.socket, world=2, rank=0, dp=2, group=0, run_id=run_id,
                     agg=agg, restore=state, canonical_replicas=C)
    try:
        with pytest.raises(zephon.ZephonError, match=match):
            pipe.attach()
    finally:
        pipe.close()


class EngineGuarantees:
    """The guarantees as tests. A subclass sets FORMAT; FOLDER, the dataset's folder under
    `data`; FIELD and OTHER_FIELD, two columns holding the same token ids (so a restore with
    the other one differs only in the spec); CHANGED_SHARD, a regex for the shard
    rewrite(data, folder) changes, which rewrites the dataset files copied to `folder`."""

    FORMAT: str
    FOLDER: str
    FIELD: str
    OTHER_FIELD: str
    CHANGED_SHARD: str

    def dataset(self, folder: Path, field: str | None = None) -> zephon.Dataset:
        return zephon.Dataset.from_path("ds", str(folder), fmt=self.FORMAT,
                                        field=field or self.FIELD)

    def test_steps_hold_the_same_samples_for_dp_1_2_and_4(self, data, nodes, tmp_path):
        check_steps_equal_across_dp(self.dataset(data / self.FOLDER), nodes, tmp_path / "agg")

    def test_checkpoint_on_dp_2_resumes_on_dp_1_and_4(self, data, nodes, tmp_path):
        check_resume_across_dp(self.dataset(data / self.FOLDER), nodes, tmp_path / "agg")

    def test_tp_peers_get_byte_identical_batches(self, data, nodes, tmp_path):
        check_peers_byte_identical(self.dataset(data / self.FOLDER), nodes, tmp_path / "agg")

    def test_restore_with_another_field_is_refused_by_the_spec_hash(self, data, nodes,
                                                                     tmp_path):
        agg = tmp_path / "agg"
        (d,) = nodes(1)
        state = checkpoint_of(self.dataset(data / self.FOLDER), d, agg, "field")
        check_restore_refused(self.dataset(data / self.FOLDER, self.OTHER_FIELD), state, d,
                              agg, "field", r"spec hash .* differs from the checkpoint's")

    def test_restore_after_files_were_rewritten_is_refused_naming_a_shard(self, data, nodes,
                                                                          tmp_path):
        folder = tmp_path / "ds"
        shutil.copytree(data / self.FOLDER, folder)
        agg = tmp_path / "agg"
        (d,) = nodes(1)
        state = checkpoint_of(self.dataset(folder), d, agg, "file")
        self.rewrite(data, folder)
        check_restore_refused(self.dataset(folder), state, d, agg, "file",
                              rf"cannot restore: dataset 'ds' {self.CHANGED_SHARD}: .*changed")
