"""Run identity as upstream allows it (issue 17): a checkpoint restored into a Pipeline of
another run_id (a restarted job given a new id, a forked run) continues the stream under
the new id, and the new run's checkpoints carry the lineage; restoring a mid-window
checkpoint on another topology warns, as upstream's does."""
from __future__ import annotations

import numpy as np

import zephon


def pipe(corpus, socket, run_id, agg, restore=None):
    ds = zephon.Dataset.from_path("web", str(corpus), fmt="megatron")
    ws = zephon.StaticMixtureWorkSource([ds], seed=4, chunk_size=16)
    p = (zephon.Pipeline(ws).shuffle(32, seed=1).pack_flat(max_length=65).batch(2)
         .options(daemon=socket, run_id=run_id, aggregate_dir=str(agg), canonical_replicas=1))
    return p.restore(restore) if restore is not None else p


def take(it, n):
    return [np.array(next(it)["tokens"]) for _ in range(n)]


def test_restore_under_a_new_run_id_continues_the_stream_and_records_the_lineage(
        corpus, daemon, tmp_path):
    agg = tmp_path / "agg"
    first = pipe(corpus, daemon.socket, "job-a", agg)
    it = iter(first)
    take(it, 4)
    state_a = first.checkpoint()
    reference = take(it, 8)
    first.close()

    second = pipe(corpus, daemon.socket, "job-b", agg, restore=state_a)
    it = iter(second)
    got = take(it, 4)
    state_b = second.checkpoint()
    second.close()
    assert all(np.array_equal(a, b) for a, b in zip(reference[:4], got))
    info = zephon.inspect_checkpoint(state_b)
    assert info["run_id"] == "job-b"
    assert info["lineage"] == [{"run_id": "job-a", "round": 0}]
    assert info["round"] == 1, "the round numbering continues from the restored round"
    assert list((agg / "job-b").glob("checkpoint-*")), "written under the new run's id"

    # A second hop keeps the whole lineage, oldest first; the same id adds nothing.
    third = pipe(corpus, daemon.socket, "job-c", agg, restore=state_b)
    it = iter(third)
    assert all(np.array_equal(a, b) for a, b in zip(reference[4:6], take(it, 2)))
    state_c = third.checkpoint()
    third.close()
    assert zephon.inspect_checkpoint(state_c)["lineage"] == [
        {"run_id": "job-a", "round": 0}, {"run_id": "job-b", "round": 1}]
    again = pipe(corpus, daemon.socket, "job-c", agg, restore=state_c)
    it = iter(again)
    assert all(np.array_equal(a, b) for a, b in zip(reference[6:8], take(it, 2)))
    assert zephon.inspect_checkpoint(again.checkpoint())["lineage"] == \
        zephon.inspect_checkpoint(state_c)["lineage"]
    again.close()


def test_restoring_a_mid_window_checkpoint_on_another_topology_warns(corpus, daemon,
                                                                     tmp_path):
    import pytest
    ds = zephon.Dataset.from_path("web", str(corpus), fmt="megatron")

    def make(**options):
        ws = zephon.StaticMixtureWorkSource([ds], seed=4, chunk_size=16)
        return (zephon.Pipeline(ws).pack_flat(max_length=65).batch(2)
                .options(daemon=daemon.socket, canonical_replicas=2, run_id="mid",
                         aggregate_dir=str(tmp_path / "agg"), **options))

    one = make()
    next(iter(one))  # one batch of C=2 lanes: mid-window
    with pytest.warns(RuntimeWarning, match="mid-window"):
        state = one.checkpoint()
    one.close()
    same = make().restore(state)
    import warnings
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        same.attach()
    same.close()
    assert not [w for w in seen if "mid-window" in str(w.message)], "same topology: quiet"
    other = make(world_size=2, global_rank=0, dp_degree=2, dp_group_id=0).restore(state)
    with pytest.warns(RuntimeWarning, match=r"restoring on dp_degree=2 mapping_strategy="
                                            r"contiguous a checkpoint saved on dp_degree=1 "
                                            r"mapping_strategy=contiguous and taken mid-window"):
        other.attach()
    other.close()
    # Another mapping on the same dp_degree also changes what the following steps hold.
    remapped = make(mapping_strategy="interleaved").restore(state)
    with pytest.warns(RuntimeWarning, match=r"mapping_strategy=interleaved a checkpoint saved "
                                            r"on dp_degree=1 mapping_strategy=contiguous"):
        remapped.attach()
    remapped.close()


def test_a_fresh_run_may_reuse_the_id_of_a_run_that_ended(corpus, daemon, tmp_path):
    """A job restarted from scratch under its old run_id works, warning that the id was
    reused, instead of failing its first checkpoint as a 'late report' of the old run's
    round 0 (the pattern of parametrized test suites and of manual restarts)."""
    import pytest
    agg = tmp_path / "agg"
    old = pipe(corpus, daemon.socket, "again", agg)
    next(iter(old))
    old.checkpoint()
    old.close()
    fresh = pipe(corpus, daemon.socket, "again", agg)
    with pytest.warns(RuntimeWarning, match=r"run_id='again' was used by a run that ended: its "
                                            r"1 finished checkpoint round\(s\) .* forgotten"):
        fresh.attach()
    it = iter(fresh)
    take(it, 3)  # another position than the old run's round 0
    state = fresh.checkpoint()
    fresh.close()
    info = zephon.inspect_checkpoint(state)
    assert info["round"] == 0 and info["total_batches"] == 3 and info["lineage"] == []


def test_two_live_jobs_under_one_run_id_are_refused_naming_both(corpus, daemon, tmp_path):
    """The same rank of one named run attached twice is a second job under that run_id:
    refused naming both processes, while the first job goes on; once the first job's
    rank has gone, the id is free again."""
    import os
    import subprocess
    import sys
    import pytest
    agg = tmp_path / "agg"
    first = pipe(corpus, daemon.socket, "twice", agg)
    it = iter(first)
    head = take(it, 2)
    # The second job is another process (as it would be), attaching as rank 0 too.
    code = (
        "import sys, zephon\n"
        f"sys.path.insert(0, {os.path.dirname(__file__)!r})\n"
        "from test_run_identity import pipe\n"
        f"p = pipe({str(corpus)!r}, {daemon.socket!r}, 'twice', {str(agg)!r})\n"
        "try:\n"
        "    p.attach()\n"
        "except zephon.ZephonError as e:\n"
        "    print(type(e).__name__, str(e)); sys.exit(3)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    second = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env, timeout=60)
    assert second.returncode == 3, second.stdout + second.stderr
    message = second.stdout
    assert message.startswith("SpecMismatchError ")
    assert "run_id='twice' global_rank=0 is already attached" in message
    assert f"(pid {os.getpid()}," in message, "names the first job's process"
    assert "two live jobs under one run_id" in message
    # The first job is untouched: its stream goes on, and it checkpoints.
    assert len(take(it, 1)) == 1
    first.checkpoint()
    first.close()
    again = pipe(corpus, daemon.socket, "twice", agg)
    with pytest.warns(RuntimeWarning, match="was used by a run that ended"):
        again.attach()
    again.close()
    del head
