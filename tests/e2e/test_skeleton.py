"""End-to-end invariants of the walking skeleton, with real zephond processes."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import zephon
from conftest import pipeline
from zephon import demo
from zephond_process import autostart_env, one_batch_script


def digest(batch) -> str:
    return hashlib.sha256(batch["tokens"].tobytes() + batch["positions"].tobytes()).hexdigest()


def read(pipe, n):
    out = []
    it = iter(pipe)
    for _ in range(n):
        b = next(it)
        out.append((digest(b), b.lane, b.lane_batch_index, tuple(b.ids)))
    return out


def test_import_from_checkout():
    env = dict(os.environ, PYTHONPATH=str(Path(zephon.__file__).parents[1]))
    rc = subprocess.run(["/usr/bin/python3", "-c", "import zephon; print(zephon.Pipeline)"],
                        env=env, capture_output=True, text=True)
    assert rc.returncode == 0, rc.stderr
    assert "Pipeline" in rc.stdout


def test_four_rank_processes_peers_identical_groups_disjoint(daemon, corpus, tmp_path):
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    seen = {}
    results = demo.run_topology(sys.executable, tmp_path, str(corpus), daemon.socket,
                                dp_degree=2, peers=2, barrier=barrier,
                                on_attached=lambda: seen.update(zephon.daemon_status(daemon.socket)))
    by_rank = {r["rank"]: r for r in results}
    assert by_rank[0]["steps"] == by_rank[1]["steps"]
    assert by_rank[2]["steps"] == by_rank[3]["steps"]
    assert by_rank[0]["steps"] != by_rank[2]["steps"]
    g0 = {tuple(i) for s in by_rank[0]["steps"] for b in s for i in b["ids"]}
    g1 = {tuple(i) for s in by_rank[2]["steps"] for b in s for i in b["ids"]}
    assert g0 and g1 and not (g0 & g1)
    # Peers share one instance: 2 instances for 4 ranks.
    assert len(seen["instances"]) == 2
    assert by_rank[0]["instance"] == by_rank[1]["instance"] != by_rank[2]["instance"]
    # Contiguous mapping: group 0 owns lanes 0,1 and group 1 lanes 2,3, in round-robin.
    lanes0 = [b["lane"] for s in by_rank[0]["steps"] for b in s]
    assert lanes0 == [0, 1] * demo.STEPS


@pytest.mark.parametrize("mapping", ["contiguous", "interleaved"])
def test_every_step_holds_the_same_samples_for_every_dp_degree(daemon, corpus, mapping):
    C, steps = 4, 5
    per_step_sets = {}
    for D in (1, 2, 4):
        pipes = [pipeline(corpus, daemon.socket, world_size=D, global_rank=g, dp_degree=D,
                          dp_group_id=g, canonical_replicas=C, mapping_strategy=mapping,
                          run_id=f"elastic-{mapping}-{D}", aggregate_dir="/tmp/zephon-agg")
                 for g in range(D)]
        streams = [read(p, steps * C // D) for p in pipes]
        for p in pipes:
            p.close()
        sets = []
        for s in range(steps):
            k = C // D
            step = Counter()
            for stream in streams:
                for h, lane, lane_batch, ids in stream[s * k:(s + 1) * k]:
                    step[(h, lane, lane_batch)] += 1
            sets.append(step)
        per_step_sets[D] = sets
    for s in range(steps):
        assert per_step_sets[1][s] == per_step_sets[2][s] == per_step_sets[4][s], f"step {s}"
        assert sum(per_step_sets[1][s].values()) == C


def test_same_spec_same_stream_across_daemons(make_daemon, corpus):
    a, b = make_daemon("node-a"), make_daemon("node-b")
    pa = pipeline(corpus, a.socket)
    pb = pipeline(corpus, b.socket)
    assert read(pa, 6) == read(pb, 6)
    assert pa.attach_info["ring_name"] != pb.attach_info["ring_name"]
    assert a.shm_segments() and b.shm_segments()
    pa.close()
    pb.close()


BAD_OPTIONS = [
    (dict(world_size=0), "world_size=0"),
    (dict(world_size=2, global_rank=2, run_id="r", aggregate_dir="/tmp/a"), "global_rank=2"),
    (dict(world_size=2, global_rank=0, dp_degree=3, run_id="r", aggregate_dir="/tmp/a"),
     "dp_degree=3"),
    (dict(world_size=6, global_rank=0, dp_degree=4, run_id="r", aggregate_dir="/tmp/a"),
     "not divisible by dp_degree=4"),
    (dict(world_size=4, global_rank=0, dp_degree=2, dp_group_id=2, run_id="r",
          aggregate_dir="/tmp/a"), "dp_group_id=2"),
    (dict(world_size=4, global_rank=0, canonical_replicas=2, run_id="r",
          aggregate_dir="/tmp/a"), "exceeds canonical_replicas=2"),
    (dict(world_size=2, global_rank=0, run_id="r"), "aggregate_dir is required"),
    (dict(world_size=2, global_rank=0, aggregate_dir="/tmp/a"), "run_id is required"),
    (dict(world_size=2, global_rank=0, aggregate_dir="/tmp/a", run_id="has space"),
     "run_id='has space'"),
    # Explicit 0 is not "unset"; bounds are checked before any narrowing to 32 bits.
    (dict(canonical_replicas=0), "canonical_replicas=0 is invalid: expected 1 <= "
     "canonical_replicas <= 65536"),
    (dict(canonical_replicas=100_000), "canonical_replicas=100000 is invalid"),
    (dict(canonical_replicas=2**32 + 2), "canonical_replicas=4294967298 is invalid"),
    (dict(world_size=2**32 + 2, run_id="r", aggregate_dir="/tmp/a"),
     "world_size=4294967298 is invalid: expected 1 <= world_size <= 131072"),
]


@pytest.mark.parametrize("options,message", BAD_OPTIONS)
def test_invalid_options_get_clear_errors(daemon, corpus, options, message):
    pipe = pipeline(corpus, daemon.socket, **options)
    with pytest.raises(zephon.InvalidOptionError, match=message.replace("(", r"\(")):
        pipe.attach()


def test_bad_spec_values_get_clear_errors(daemon, corpus, tmp_path):
    with pytest.raises(zephon.ZephonError, match="missing"):
        missing = zephon.Dataset.from_path("x", str(tmp_path / "missing"), fmt="megatron")
        zephon.Pipeline(zephon.StaticMixtureWorkSource([missing])).pack_flat(129).batch(2) \
            .options(daemon=daemon.socket).attach()
    # As upstream: an unknown option warns, naming the closest known one, and is ignored.
    with pytest.warns(UserWarning, match="unknown Pipeline option 'prefetch_batch' ignored; "
                                         "did you mean 'prefetch_batches'"):
        pipeline(corpus, daemon.socket, prefetch_batch=2)
    with pytest.raises(ValueError, match="mapping"):
        pipeline(corpus, daemon.socket, mapping_strategy="diagonal").attach()


def test_non_finite_mixture_weights_name_the_dataset(corpus):
    a = zephon.Dataset.from_path("web", str(corpus), fmt="megatron")
    b = zephon.Dataset.from_path("code", str(corpus), fmt="megatron")
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match=f"mixture weight of dataset 'code' is {bad}"):
            zephon.StaticMixtureWorkSource([a, b], mixture={"web": 1.0, "code": bad})
        with pytest.raises(ValueError, match="mixture weight of dataset 'code'"):
            zephon.StaticMixtureWorkSource([a, b], mixture=[1.0, bad])


def test_relative_aggregate_dir_resolves_against_the_trainers_cwd(daemon, corpus, tmp_path,
                                                                  monkeypatch):
    trainer_cwd = tmp_path / "trainer"
    trainer_cwd.mkdir()
    monkeypatch.chdir(trainer_cwd)
    pipe = pipeline(corpus, daemon.socket, run_id="relative", aggregate_dir="ckpt/agg")
    read(pipe, 2)
    pipe.checkpoint()
    pipe.close()
    written = list((trainer_cwd / "ckpt" / "agg" / "relative").glob("checkpoint-*.zckpt"))
    assert written, f"no checkpoint under the trainer's cwd {trainer_cwd}"


def test_dataset_smaller_than_one_chunk_is_an_error_at_attach(daemon, corpus):
    pipe = pipeline(corpus, daemon.socket, chunk_size=4096)
    with pytest.raises(zephon.InvalidOptionError,
                       match="dataset 'web' has 2000 samples, fewer than its share of one chunk "
                             r"\(4096 of chunk_size=4096\)"):
        pipe.attach()


def test_lone_bin_is_a_missing_index_unless_fmt_flat(daemon, corpus, tmp_path):
    lone = tmp_path / "lone"
    lone.mkdir()
    (lone / "shard-0.bin").write_bytes((corpus / "shard-0.bin").read_bytes())
    for fmt in (None, "megatron"):
        ds = zephon.Dataset.from_path("web", str(lone), fmt=fmt)
        ws = zephon.StaticMixtureWorkSource([ds], chunk_size=32)
        pipe = zephon.Pipeline(ws).pack_flat(129).batch(2).options(daemon=daemon.socket)
        with pytest.raises(zephon.ZephonError, match=r"shard-0\.bin has no matching \.idx file "
                                                     rf"\({lone}/shard-0\.idx\)"):
            pipe.attach()
    flat = zephon.Dataset.from_path("web", str(lone), fmt="flat", sample_tokens=128)
    pipe = (zephon.Pipeline(zephon.StaticMixtureWorkSource([flat], chunk_size=32))
            .pack_flat(129).batch(2).options(daemon=daemon.socket))
    assert len(read(pipe, 2)) == 2
    pipe.close()


def test_uneven_lanes_warn(daemon, corpus):
    pipe = pipeline(corpus, daemon.socket, world_size=3, global_rank=0, canonical_replicas=4,
                    run_id="uneven", aggregate_dir="/tmp/a")
    with pytest.warns(RuntimeWarning, match="canonical_replicas=4 is not divisible by dp_degree=3"):
        pipe.attach()
    assert pipe.attach_info["owned_lanes"] == [0, 1]
    pipe.close()


def test_peer_with_another_spec_hash_is_refused(daemon, corpus):
    common = dict(world_size=2, global_rank=0, dp_degree=1, dp_group_id=0, run_id="mismatch",
                  aggregate_dir="/tmp/a")
    first = pipeline(corpus, daemon.socket, seed=1, **common).attach()
    other = pipeline(corpus, daemon.socket, seed=2, **dict(common, global_rank=1))
    with pytest.raises(zephon.SpecMismatchError) as err:
        other.attach()
    message = str(err.value)
    assert first.attach_info["spec_hash"] in message
    assert "spec hash mismatch" in message and "dp_group_id=0" in message
    # The refusal names the other hash too: exactly two distinct 16-hex hashes.
    import re
    assert len(set(re.findall(r"\b[0-9a-f]{16}\b", message))) == 2
    first.close()


def test_execution_knobs_do_not_change_the_spec_hash(daemon, corpus):
    common = dict(world_size=2, dp_degree=1, dp_group_id=0, run_id="knobs", aggregate_dir="/tmp/a")
    a = pipeline(corpus, daemon.socket, global_rank=0, prefetch_batches=4, **common).attach()
    b = pipeline(corpus, daemon.socket, global_rank=1, prefetch_batches=16, **common).attach()
    assert a.attach_info["spec_hash"] == b.attach_info["spec_hash"]
    assert a.attach_info["instance_id"] == b.attach_info["instance_id"]
    a.close()
    b.close()


def test_late_peer_still_sees_the_stream_from_the_start(daemon, corpus):
    common = dict(world_size=2, dp_degree=1, dp_group_id=0, run_id="late", aggregate_dir="/tmp/a")
    early = pipeline(corpus, daemon.socket, global_rank=0, **common)
    first = read(early, 5)
    late = pipeline(corpus, daemon.socket, global_rank=1, **common)
    assert read(late, 5) == first
    assert early.attach_info["instance_id"] == late.attach_info["instance_id"]
    assert read(early, 3) == read(late, 3)
    early.close()
    late.close()


def test_instance_goes_away_with_its_last_reader(daemon, corpus):
    pipe = pipeline(corpus, daemon.socket)
    read(pipe, 2)
    status = zephon.daemon_status(daemon.socket)
    assert len(status["instances"]) == 1
    assert len(daemon.shm_segments()) == 1
    pipe.close()
    deadline = time.monotonic() + 5
    while zephon.daemon_status(daemon.socket).get("instances"):
        assert time.monotonic() < deadline, "instance survived its last reader"
        time.sleep(0.05)
    assert daemon.shm_segments() == []


def test_batches_are_zero_copy_views_with_ids(daemon, corpus):
    pipe = pipeline(corpus, daemon.socket, max_length=65, microbatch=4)
    batch = next(iter(pipe))
    tokens, positions = batch["tokens"], batch["positions"]
    assert tokens.shape == (4, 65) and tokens.dtype == np.int32
    assert positions.shape == (4, 65)
    assert not tokens.flags.owndata and not tokens.flags.writeable
    assert positions[0, 0] == 0
    ids = batch.ids
    assert ids and all(isinstance(i, zephon.SampleId) for i in ids)
    assert len(set(ids)) == len(ids)
    training = batch.to_training(return_labels=True, as_torch=False)
    assert training["input_ids"].shape == (4, 64)
    assert np.array_equal(training["labels"][:, :-1], training["input_ids"][:, 1:])
    batch.close()
    with pytest.raises(RuntimeError, match="released"):
        batch["tokens"]
    pipe.close()


def test_end_of_data_ends_iteration_without_duplicates(daemon, tmp_path):
    docs = [np.full(10, i + 1) for i in range(200)]  # 200 docs x 10 tokens
    zephon.write_megatron_dataset(tmp_path / "tiny", docs)
    ds = zephon.Dataset.from_path("tiny", str(tmp_path / "tiny"), fmt="megatron")
    ws = zephon.StaticMixtureWorkSource([ds], seed=3, chunk_size=30)
    pipe = zephon.Pipeline(ws).pack_flat(max_length=20).batch(2).options(daemon=daemon.socket)
    seen = []
    batches = 0
    for batch in pipe:
        batches += 1
        seen.extend(batch.ids)
    # 200 docs in chunks of 30: 6 full chunks (180 docs) in one pass; 10 tokens per doc,
    # 2 docs per record, 2 records per batch -> 4 docs per batch, complete within chunks.
    assert len(seen) == len(set(seen)) == 180
    assert batches == 45
    pipe.close()


def test_client_autostarts_a_daemon_that_exits_when_idle(corpus, tmp_path):
    socket = str(tmp_path / "auto" / "zephond.sock")
    env = autostart_env(socket, idle_exit_s=1)
    script = one_batch_script(corpus) + "print(b['tokens'].shape); p.close()\n"
    out = subprocess.run(["/usr/bin/python3", "-c", script], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "(2, 65)" in out.stdout
    lock = Path(socket + ".lock")
    assert lock.exists()
    pid = int(lock.read_text().strip())
    deadline = time.monotonic() + 15
    while _alive(pid):
        assert time.monotonic() < deadline, "auto-started zephond did not exit when idle"
        time.sleep(0.1)
    assert not os.path.exists(socket)


def test_ranks_that_autostart_at_once_share_the_daemon_that_won(corpus, tmp_path):
    """Four ranks of a node start together with no daemon: each starts one, one wins the
    socket's lock and the others exit at once. Their clients see their own daemon exit
    and wait for the winner (not an error, and not the whole attach timeout)."""
    socket = str(tmp_path / "auto" / "zephond.sock")
    env = autostart_env(socket, idle_exit_s=10)
    script = one_batch_script(corpus) + "print(b['tokens'].shape); p.close()\n"
    ranks = [subprocess.Popen(["/usr/bin/python3", "-c", script], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    outs = [r.communicate(timeout=60) for r in ranks]
    for rank, (stdout, stderr) in zip(ranks, outs):
        assert rank.returncode == 0, stderr
        assert "(2, 65)" in stdout
    # One daemon served them all (the losers exited before listening).
    log = Path(socket + ".log").read_text()
    assert log.count("listening on") == 1, log


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False
