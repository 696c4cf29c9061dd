"""Checkpoint barrier, leader aggregation over gRPC and elastic resume, with several
zephond processes on one machine (own sockets, shm prefixes and peer ports: simulated
nodes). Ranks are Pipeline objects driven from threads of this process."""
from __future__ import annotations

import hashlib
import os
import signal
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import zephon
from zephond_process import Daemon, private_dir

C = 8
STEPS = 6
BATCHES_PER_STEP = 8  # a multiple of C


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    from zephon.corpus import synthetic_documents
    root = tmp_path_factory.mktemp("ckpt-corpus")
    docs = synthetic_documents(1200, seed=21, min_len=10, max_len=160)
    zephon.write_megatron_dataset(root / "a", docs[:600])
    zephon.write_megatron_dataset(root / "b", docs[600:])
    return root


def make_pipe(corpus, socket, *, world, rank, dp, group, run_id, agg, timeout=30.0,
              restore=None, tokenize=None, **extra):
    # `corpus`: a Megatron folder, or a zephon.Dataset (engine_checks.py runs these jobs
    # on Parquet and MDS datasets, text ones through tokenize(**tokenize)).
    ds = (corpus if isinstance(corpus, zephon.Dataset)
          else zephon.Dataset.from_path("web", str(corpus), fmt="megatron"))
    ws = zephon.StaticMixtureWorkSource([ds], seed=5, chunk_size=16, shuffle_within_shard=True,
                                        exhausted_policy="repeat")
    pipe = zephon.Pipeline(ws)
    if tokenize is not None:
        pipe = pipe.tokenize(**tokenize)
    pipe = (pipe.shuffle(buffer_size=16, seed=2).pack_flat(max_length=33)
            .batch(2).options(daemon=socket, world_size=world, global_rank=rank,
                              dp_degree=dp, dp_group_id=group, run_id=run_id,
                              aggregate_dir=str(agg), aggregate_timeout_s=timeout,
                              **extra))
    if restore is not None:
        pipe.restore(restore)
    return pipe


def digest(batch) -> str:
    return hashlib.sha256(batch["tokens"].tobytes()).hexdigest()[:16]


class Job:
    """One training job: `world` ranks (threads), `peers` per DP group, spread over
    daemons round-robin by rank."""

    def __init__(self, corpus, daemons, *, dp, peers, run_id, agg, restore=None,
                 canonical_replicas=C, timeout=30.0, tokenize=None):
        self.dp, self.peers = dp, peers
        world = dp * peers
        node_of = [r % len(daemons) for r in range(world)]

        def local_peers(r):  # ranks of r's DP group on r's node: they share one instance
            return sum(1 for q in range(world)
                       if q // peers == r // peers and node_of[q] == node_of[r])

        self.pipes = [make_pipe(corpus, daemons[node_of[r]].socket, world=world, rank=r,
                                dp=dp, group=r // peers, run_id=run_id, agg=agg,
                                restore=restore, timeout=timeout, tokenize=tokenize,
                                canonical_replicas=canonical_replicas,
                                local_peers=local_peers(r))
                      for r in range(world)]
        self.iters = [None] * world
        self.pool = ThreadPoolExecutor(max_workers=world)

    def _read(self, r, n):
        if self.iters[r] is None:
            self.iters[r] = iter(self.pipes[r])
        return [digest(next(self.iters[r])) for _ in range(n)]

    def step(self) -> Counter:
        """One optimizer step: BATCHES_PER_STEP batches across DP groups; peers must agree."""
        per_rank = BATCHES_PER_STEP // self.dp
        got = list(self.pool.map(lambda r: self._read(r, per_rank), range(len(self.pipes))))
        for r in range(len(self.pipes)):
            assert got[r] == got[(r // self.peers) * self.peers], "peers disagree"
        return Counter(h for r in range(0, len(self.pipes), self.peers) for h in got[r])

    def checkpoint(self) -> list:
        return list(self.pool.map(lambda p: p.checkpoint(), self.pipes))

    def checkpoint_fails(self, timeout: float = 60) -> list[str]:
        """Every rank's checkpoint() must raise ZephonError (within `timeout`); their messages."""
        futures = [self.pool.submit(p.checkpoint) for p in self.pipes]
        errors = []
        for f in futures:
            with pytest.raises(zephon.ZephonError) as e:
                f.result(timeout=timeout)
            errors.append(str(e.value))
        return errors

    def close(self):
        for p in self.pipes:
            p.close()
        self.pool.shutdown()


@pytest.fixture
def nodes(tmp_path):
    started = []

    def make(n):
        for i in range(n):
            started.append(Daemon(private_dir(tmp_path / f"node{len(started)}")))
        return started[-n:]

    yield make
    for d in started:
        d.stop()
        # Even a daemon a test SIGKILLed leaves nothing: its rings were memfds.
        assert d.legacy_shm_segments() == []


def reference_steps(corpus, nodes, agg, tokenize=None) -> list:
    (d,) = nodes(1)
    job = Job(corpus, [d], dp=1, peers=1, run_id="reference", agg=agg, tokenize=tokenize)
    steps = [job.step() for _ in range(STEPS)]
    job.close()
    return steps


def test_elastic_resume_across_three_daemons(corpus, nodes, tmp_path):
    agg = tmp_path / "agg"
    want = reference_steps(corpus, nodes, agg)

    daemons = nodes(3)
    job = Job(corpus, daemons, dp=4, peers=2, run_id="r1", agg=agg)
    for s in range(3):
        assert job.step() == want[s], f"step {s}"
    states = job.checkpoint()
    assert all(s == states[0] for s in states), "every rank gets the same bytes"
    files = sorted((agg / "r1").glob("checkpoint-*"))
    assert len(files) == 1 and files[0].read_bytes() == states[0]
    job.close()
    for d in daemons:
        assert d.stop() == 0

    for dp, peers in ((2, 2), (1, 1), (8, 1)):
        fresh = nodes(3)
        resumed = Job(corpus, fresh, dp=dp, peers=peers, run_id="r1", agg=agg,
                      restore=states[0])
        for s in range(3, STEPS):
            assert resumed.step() == want[s], f"dp={dp}: step {s}"
        resumed.close()


def test_resume_twice_and_one_pipeline_per_dp_group(corpus, nodes, tmp_path):
    agg = tmp_path / "agg"
    want = reference_steps(corpus, nodes, agg)
    daemons = nodes(2)
    # Megatron style: one Pipeline per DP group, so world_size == dp_degree.
    job = Job(corpus, daemons, dp=4, peers=1, run_id="r2", agg=agg)
    assert [job.step() for _ in range(2)] == want[:2]
    first = job.checkpoint()[0]
    job.close()
    job = Job(corpus, daemons, dp=2, peers=1, run_id="r2", agg=agg, restore=first)
    assert job.step() == want[2]
    second = job.checkpoint()[0]
    job.close()
    job = Job(corpus, daemons, dp=8, peers=1, run_id="r2", agg=agg, restore=second)
    assert [job.step() for _ in range(3, STEPS)] == want[3:]
    job.close()
    assert len(list((agg / "r2").glob("checkpoint-*"))) == 2


def test_checkpoint_at_the_end_of_data_resumes_to_the_end(nodes, tmp_path):
    docs = [np.full(16, i + 1) for i in range(64)]  # 64 docs x 16 tokens
    zephon.write_megatron_dataset(tmp_path / "tiny", docs)
    (d,) = nodes(1)

    def pipe(restore=None):
        ds = zephon.Dataset.from_path("tiny", str(tmp_path / "tiny"), fmt="megatron")
        ws = zephon.StaticMixtureWorkSource([ds], chunk_size=8)
        p = (zephon.Pipeline(ws).pack_flat(max_length=16).batch(1)
             .options(daemon=d.socket, canonical_replicas=2))
        return p.restore(restore) if restore else p

    p = pipe()
    total = sum(1 for _ in p)
    assert total == 64
    state = p.checkpoint()
    p.close()
    q = pipe(state)
    assert list(q) == []
    q.close()


def late_rank_rounds(corpus, socket, agg, *, early: int, attempts: int, run_prefix: str):
    """Two ranks (DP groups) on one zephond, no barrier: rank `early` attaches, reads a
    step and calls checkpoint(); only then does the other rank attach, read and call.
    Both must get the same bytes, every attempt. Returns the last merged checkpoint."""
    per_rank = BATCHES_PER_STEP // 2
    for attempt in range(attempts):
        pipes = [make_pipe(corpus, socket, world=2, rank=r, dp=2, group=r,
                           run_id=f"{run_prefix}-{attempt}", agg=agg, timeout=30.0)
                 for r in range(2)]
        order = [pipes[early], pipes[1 - early]]
        it = iter(order[0])
        for _ in range(per_rank):
            next(it)
        with ThreadPoolExecutor(1) as pool:
            first = pool.submit(order[0].checkpoint)
            time.sleep(0.2)  # the early rank is in its round; the other is not attached
            assert not first.done()
            it = iter(order[1])
            for _ in range(per_rank):
                next(it)
            second = order[1].checkpoint()
            assert first.result(timeout=60) == second, f"attempt {attempt}"
        for p in pipes:
            p.close()
    return second


def test_rank_attaching_after_the_first_checkpoint_call_joins_the_round(corpus, nodes,
                                                                        tmp_path):
    # Issue 16: rank 1 attaches to the same zephond and calls checkpoint() only after
    # rank 0 already called it, with no barrier between them. The round used to fix its
    # local ranks at rank 0's call and time out ("ranks [1] were missing") most times.
    (d,) = nodes(1)
    state = late_rank_rounds(corpus, d.socket, tmp_path / "agg", early=0, attempts=10,
                             run_prefix="late")
    ranks = zephon.inspect_checkpoint(state)["ranks"]
    per_rank = BATCHES_PER_STEP // 2
    assert [(r["global_rank"], r["dp_group_id"], r["taken"]) for r in ranks] == [
        (0, 0, per_rank), (1, 1, per_rank)]


@pytest.mark.parametrize("peer", [True, False], ids=["peer-port", "no-peer-port"])
def test_rank_0_attaching_after_a_follower_called_leads_the_round(corpus, tmp_path, peer):
    # The other order: rank 1's report goes looking for the leader before rank 0 has
    # attached to this same zephond; the leader file then names this daemon (its peer
    # address, or "serves no peers") before rank 0 is registered, and the report must
    # wait for it and go to this daemon's own aggregator.
    d = Daemon(private_dir(tmp_path / "node"), peer=peer)
    try:
        late_rank_rounds(corpus, d.socket, tmp_path / "agg", early=1, attempts=5,
                         run_prefix="rev")
    finally:
        d.stop()


def test_missing_rank_times_out_listing_it_and_writes_nothing(corpus, nodes, tmp_path):
    agg = tmp_path / "agg"
    daemons = nodes(2)
    job = Job(corpus, daemons, dp=2, peers=2, run_id="r3", agg=agg, timeout=2.0)
    job.step()
    with ThreadPoolExecutor(3) as pool:  # rank 3 never calls
        futures = [pool.submit(job.pipes[r].checkpoint) for r in range(3)]
        for f in futures:
            with pytest.raises(zephon.ZephonError, match=r"3") as err:
                f.result(timeout=60)
            assert "checkpoint() at the same step" in str(err.value)
    assert not list((agg / "r3").glob("checkpoint-*"))
    job.close()


def test_peers_at_different_steps_fail_naming_ranks_and_counts(corpus, nodes, tmp_path):
    agg = tmp_path / "agg"
    daemons = nodes(2)
    job = Job(corpus, daemons, dp=1, peers=2, run_id="r4", agg=agg, timeout=5.0)
    job.step()
    next(job.iters[1])  # rank 1 takes one batch more than its peer
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(p.checkpoint) for p in job.pipes]
        for f in futures:
            with pytest.raises(zephon.ZephonError) as err:
                f.result(timeout=60)
            assert "rank 0" in str(err.value) and "rank 1" in str(err.value)
            assert "8" in str(err.value) and "9" in str(err.value)
    assert not list((agg / "r4").glob("checkpoint-*"))
    job.close()


def test_leader_daemon_dies_mid_round_callers_get_errors(corpus, nodes, tmp_path):
    agg = tmp_path / "agg"
    leader, follower = nodes(2)
    job = Job(corpus, [leader, follower], dp=2, peers=1, run_id="r5", agg=agg, timeout=60.0)
    job.step()
    # Rank 1 (on the follower) reports; rank 0 (on the leader) never calls; then the
    # leader's daemon is killed.
    with ThreadPoolExecutor(1) as pool:
        f = pool.submit(job.pipes[1].checkpoint)
        time.sleep(1.0)
        leader.proc.send_signal(signal.SIGKILL)
        leader.proc.wait()
        started = time.monotonic()
        with pytest.raises(zephon.ZephonError):
            f.result(timeout=60)
        assert time.monotonic() - started < 20, "a dead leader must not hang its followers"
    assert not list((agg / "r5").glob("checkpoint-*"))
    job.close()


def test_restore_refuses_bad_checkpoints(corpus, nodes, tmp_path):
    agg = tmp_path / "agg"
    (d,) = nodes(1)
    job = Job(corpus, [d], dp=2, peers=1, run_id="r6", agg=agg)
    job.step()
    state = job.checkpoint()[0]
    job.close()

    def attach(restore, **kw):
        opts = dict(world=2, rank=0, dp=2, group=0, run_id="r6", agg=agg)
        opts.update(kw)
        p = make_pipe(corpus, d.socket, restore=restore, **opts)
        try:
            p.attach()
        finally:
            p.close()

    corrupt = bytearray(state)
    corrupt[-3] ^= 0xFF
    with pytest.raises(zephon.ZephonError, match="checksum|corrupt"):
        attach(bytes(corrupt))
    with pytest.raises(zephon.ZephonError, match="truncated|short"):
        attach(state[: len(state) // 2])
    attach(state, run_id="other")  # another run_id continues the run (test_run_identity)
    with pytest.raises(zephon.ZephonError, match="canonical_replicas=4"):
        attach(state, canonical_replicas=4)
    with pytest.raises(zephon.ZephonError, match="spec hash"):
        ds = zephon.Dataset.from_path("web", str(corpus), fmt="megatron")
        p = (zephon.Pipeline(zephon.StaticMixtureWorkSource([ds], seed=99, chunk_size=16))
             .pack_flat(max_length=33).batch(2)
             .options(daemon=d.socket, world_size=2, global_rank=0, run_id="r6",
                      aggregate_dir=str(agg)).restore(state))
        try:
            p.attach()
        finally:
            p.close()
    with pytest.raises(zephon.InvalidOptionError, match="exceeds canonical_replicas=8"):
        attach(state, world=16, dp=16)


def test_restore_names_a_dataset_file_rewritten_at_the_same_size(corpus, nodes, tmp_path):
    import shutil
    data = tmp_path / "data"
    shutil.copytree(corpus, data)
    agg = tmp_path / "agg"
    (d,) = nodes(1)
    job = Job(data, [d], dp=1, peers=1, run_id="r9", agg=agg)
    job.step()
    state = job.checkpoint()[0]
    job.close()

    bin_path = data / "a.bin"
    size = bin_path.stat().st_size
    with open(bin_path, "r+b") as f:  # new token values, same size, same index
        first = f.read(4)
        f.seek(0)
        f.write(bytes(b ^ 0x5A for b in first))
    assert bin_path.stat().st_size == size
    pipe = make_pipe(data, d.socket, world=1, rank=0, dp=1, group=0, run_id="r9", agg=agg,
                     restore=state, canonical_replicas=C)
    with pytest.raises(zephon.ZephonError,
                       match=r"dataset 'web' shard 0 \(a\.bin\): content changed at the same "
                             "size"):
        pipe.attach()
    pipe.close()


def make_certs(folder: Path, san: str = "IP:127.0.0.1,DNS:localhost") -> dict:
    """A CA and one certificate (SAN `san`) shared by the test daemons."""
    import subprocess
    run = lambda *a: subprocess.run(list(a), check=True, capture_output=True, cwd=folder)
    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key",
        "-out", "ca.pem", "-days", "2", "-subj", "/CN=zephon-test-ca")
    run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "node.key", "-out",
        "node.csr", "-subj", "/CN=zephond")
    (folder / "san.ext").write_text(f"subjectAltName={san}\n")
    run("openssl", "x509", "-req", "-in", "node.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "node.pem", "-days", "2", "-extfile", "san.ext")
    return {"cert": str(folder / "node.pem"), "key": str(folder / "node.key"),
            "ca": str(folder / "ca.pem")}


@pytest.mark.skipif(os.system("command -v openssl >/dev/null") != 0, reason="needs openssl")
def test_peer_traffic_over_mutual_tls(corpus, tmp_path):
    certs = make_certs(tmp_path)
    tls = ["--peer-tls-cert", certs["cert"], "--peer-tls-key", certs["key"],
           "--peer-tls-ca", certs["ca"]]
    daemons = []
    for name in ("tls-a", "tls-b"):
        daemons.append(Daemon(private_dir(tmp_path / name), extra_args=tls))
    agg = tmp_path / "agg"
    job = Job(corpus, daemons, dp=2, peers=1, run_id="tls", agg=agg)
    job.step()
    states = job.checkpoint()
    assert states[0] == states[1] and (agg / "tls" / "checkpoint-00000000.zckpt").exists()
    job.close()
    # A follower without TLS cannot report to a TLS leader: the round fails, no file.
    plain = Daemon(private_dir(tmp_path / "plain"))
    job = Job(corpus, [daemons[0], plain], dp=2, peers=1, run_id="tls-mixed", agg=agg,
              timeout=3.0)
    job.step()
    job.checkpoint_fails()
    assert not list((agg / "tls-mixed").glob("checkpoint-*"))
    job.close()
    for d in daemons + [plain]:
        assert d.stop() == 0


def test_checkpoint_at_a_pass_boundary_resumes_into_the_next_pass(nodes, tmp_path):
    """The first pass over the data ends exactly at the checkpoint; the resumed run goes
    on into the reshuffled second pass exactly like the uninterrupted run."""
    docs = [np.full(8, i + 1) for i in range(64)]  # 64 docs x 8 tokens = 64 records/pass
    zephon.write_megatron_dataset(tmp_path / "pass", docs)
    (d,) = nodes(1)
    agg = tmp_path / "agg"

    def job(world, rank, restore=None, run_id="pass"):
        ds = zephon.Dataset.from_path("pass", str(tmp_path / "pass"), fmt="megatron")
        ws = zephon.StaticMixtureWorkSource([ds], seed=3, chunk_size=8, shuffle_within_shard=True,
                                            exhausted_policy="repeat")
        p = (zephon.Pipeline(ws).pack_flat(max_length=8).batch(2)
             .options(daemon=d.socket, world_size=world, global_rank=rank, dp_degree=world,
                      dp_group_id=rank, canonical_replicas=4, run_id=run_id,
                      aggregate_dir=str(agg)))
        return p.restore(restore) if restore else p

    def take(pipes, batches_per_step, steps):
        its = [iter(p) for p in pipes]
        out = []
        for _ in range(steps):
            step = Counter()
            for it in its:
                for _ in range(batches_per_step):
                    step[tuple(sorted(next(it).ids))] += 1
            out.append(step)
        return out

    ref = [job(1, 0, run_id="pass-ref")]
    want = take(ref, 4, 16)  # 32 batches = one pass, then 8 steps of pass two
    ref[0].close()
    first = [job(2, r) for r in range(2)]
    assert take(first, 2, 8) == want[:8]  # exactly the first pass
    with ThreadPoolExecutor(2) as pool:
        state = list(pool.map(lambda p: p.checkpoint(), first))[0]
    for p in first:
        p.close()
    resumed = [job(4, r, restore=state) for r in range(4)]
    assert take(resumed, 1, 8) == want[8:]
    for p in resumed:
        p.close()
