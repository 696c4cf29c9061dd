"""The engine guarantees test_checkpoint.py checks on Megatron data, as pytest tests over
any format's dataset, so tests/parquet and tests/mds hold record formats to the same ones
with real zephond processes: the same samples per global step whatever the DP degree,
elastic resume across DP degrees, TP peers given byte-identical batches, and a restore
refused when the dataset's field or files changed.

A test module subclasses EngineGuarantees (and, for a token-id column, RestoreRefusals)
as class Test..., and provides the `data` fixture (a folder of test files) and
test_checkpoint.py's `nodes` fixture (nodes(n) starts n daemons)."""
from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import zephon
from test_checkpoint import C, STEPS, Job, make_pipe, reference_steps


class EngineGuarantees:
    """Steps, resume and peers. A subclass sets FORMAT, FOLDER (the dataset's folder under
    `data`) and FIELD (the dataset's field: token ids; None for a text column read through
    tokenize(data), which a text subclass defines)."""

    FORMAT: str
    FOLDER: str
    FIELD: str | None

    def dataset(self, folder: Path, field: str | None = None) -> zephon.Dataset:
        return zephon.Dataset.from_path("ds", str(folder), fmt=self.FORMAT,
                                        field=field or self.FIELD)

    def tokenize(self, data: Path) -> dict | None:
        return None

    def test_steps_hold_the_same_samples_for_dp_1_2_and_4(self, data, nodes, tmp_path):
        ds, tok, agg = self.dataset(data / self.FOLDER), self.tokenize(data), tmp_path / "agg"
        want = reference_steps(ds, nodes, agg, tokenize=tok)
        assert len(set(map(frozenset, want))) == STEPS, "the steps must differ"
        daemons = nodes(2)
        for dp in (2, 4):
            job = Job(ds, daemons, dp=dp, peers=1, run_id=f"dp{dp}", agg=agg, tokenize=tok)
            got = [job.step() for _ in range(STEPS)]
            job.close()
            assert got == want, f"dp_degree={dp}"

    def test_checkpoint_on_dp_2_resumes_on_dp_1_and_4(self, data, nodes, tmp_path):
        """The checkpoint is taken with TP peers on two daemons (Job.step checks that they
        agree); the restores run on fresh daemons."""
        ds, tok, agg = self.dataset(data / self.FOLDER), self.tokenize(data), tmp_path / "agg"
        want = reference_steps(ds, nodes, agg, tokenize=tok)
        job = Job(ds, nodes(2), dp=2, peers=2, run_id="resume", agg=agg, tokenize=tok)
        for s in range(3):
            assert job.step() == want[s], f"step {s}"
        states = job.checkpoint()
        assert all(s == states[0] for s in states), "every rank gets the same checkpoint"
        job.close()
        for dp in (1, 4):
            resumed = Job(ds, nodes(2), dp=dp, peers=1, run_id="resume", agg=agg,
                          restore=states[0], tokenize=tok)
            got = [resumed.step() for _ in range(3, STEPS)]
            resumed.close()
            assert got == want[3:], f"restored on dp_degree={dp}"

    def test_tp_peers_get_byte_identical_batches(self, data, nodes, tmp_path):
        """Two ranks of one DP group, each on its own daemon: every tensor and the sample
        ids of 24 batches are equal."""
        batches = 24
        daemons = nodes(2)
        pipes = [make_pipe(self.dataset(data / self.FOLDER), daemons[r].socket, world=2,
                           rank=r, dp=1, group=0, run_id="peers", agg=tmp_path / "agg",
                           tokenize=self.tokenize(data), canonical_replicas=C, local_peers=1)
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
        assert len({g["tokens"] for g in got[0]}) > batches // 2, "the batches must differ"


class RestoreRefusals:
    """A restore refused when the field or the files changed. A subclass of
    EngineGuarantees sets OTHER_FIELD (a column holding the same token ids as FIELD, so the
    restore differs only in the spec) and CHANGED_SHARD (a regex for the shard that
    rewrite(data, folder) changes when it rewrites the dataset files copied to `folder`)."""

    OTHER_FIELD: str
    CHANGED_SHARD: str

    @staticmethod
    def checkpoint_of(dataset, daemon, agg, run_id: str) -> bytes:
        job = Job(dataset, [daemon], dp=2, peers=1, run_id=run_id, agg=agg)
        job.step()
        state = job.checkpoint()[0]
        job.close()
        return state

    @staticmethod
    def refused(dataset, state: bytes, daemon, agg, run_id: str, match: str) -> None:
        pipe = make_pipe(dataset, daemon.socket, world=2, rank=0, dp=2, group=0,
                         run_id=run_id, agg=agg, restore=state, canonical_replicas=C)
        try:
            with pytest.raises(zephon.ZephonError, match=match):
                pipe.attach()
        finally:
            pipe.close()

    def test_restore_with_another_field_is_refused_by_the_spec_hash(self, data, nodes,
                                                                     tmp_path):
        agg = tmp_path / "agg"
        (d,) = nodes(1)
        state = self.checkpoint_of(self.dataset(data / self.FOLDER), d, agg, "field")
        self.refused(self.dataset(data / self.FOLDER, self.OTHER_FIELD), state, d, agg,
                     "field", r"spec hash .* differs from the checkpoint's")

    def test_restore_after_files_were_rewritten_is_refused_naming_a_shard(self, data, nodes,
                                                                          tmp_path):
        folder = tmp_path / "ds"
        shutil.copytree(data / self.FOLDER, folder)
        agg = tmp_path / "agg"
        (d,) = nodes(1)
        state = self.checkpoint_of(self.dataset(folder), d, agg, "file")
        self.rewrite(data, folder)
        self.refused(self.dataset(folder), state, d, agg, "file",
                     rf"cannot restore: dataset 'ds' {self.CHANGED_SHARD}: .*changed")
