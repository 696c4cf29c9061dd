"""zephonctl against real processes: a zephond's status and explain, checkpoint files a
real run wrote (and a corrupted copy), and shm segments with gc refused while the daemon
lives. Exit codes: 0 ok, 1 failed, 2 usage, 3 refused, 4 unreachable."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import Daemon, pipeline
from zephond_process import cluster_secret_file, zephonctl_path

@pytest.fixture(scope="module")
def zephonctl() -> str:
    try:
        return zephonctl_path()
    except RuntimeError as e:
        pytest.fail(str(e))


def ctl(binary: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=60,
                          env=env)


def test_status_and_explain_show_an_attached_reader(zephonctl, corpus, daemon):
    pipe = pipeline(corpus, daemon.socket, canonical_replicas=2)
    it = iter(pipe)
    for _ in range(3):
        next(it)
    try:
        human = ctl(zephonctl, "status", "--socket", daemon.socket)
        assert human.returncode == 0, human.stderr
        assert f"zephond pid {daemon.proc.pid}" in human.stdout
        assert "instance " in human.stdout and "attached" in human.stdout
        assert "READER" in human.stdout and "RELEASED" in human.stdout and "fill" in human.stdout

        out = ctl(zephonctl, "status", "--socket", daemon.socket, "--json")
        assert out.returncode == 0, out.stderr
        doc = json.loads(out.stdout)
        status = doc["status"]
        assert int(status["pid"]) == daemon.proc.pid
        (instance,) = status["instances"]
        readers = [r for r in instance["readers"] if r["state"] == "attached"]
        assert len(readers) == 1 and int(readers[0]["pid"]) == os.getpid()
        assert int(readers[0]["released"]) >= 2
        (ring,) = doc["summary"]["instances"]
        assert ring["instance_id"] == instance["instance_id"]
        assert 0 <= ring["ring_fill"] <= ring["ring_slots"] == instance["ring_slots"]
        assert doc["summary"]["ring_bytes_total"] == int(instance["ring_bytes"])

        # A peer daemon's status over its TCP peer port (what an operator does across nodes).
        peer = ctl(zephonctl, "status", "--address", status["peer_address"], "--json",
                   "--peer-secret-file", cluster_secret_file())
        assert peer.returncode == 0, peer.stderr
        assert json.loads(peer.stdout)["status"]["instances"][0]["instance_id"] == \
            instance["instance_id"]

        # ZEPHON_SOCKET is how the clients find the daemon; zephonctl does the same.
        env = dict(os.environ, ZEPHON_SOCKET=daemon.socket)
        explain = ctl(zephonctl, "explain", env=env)
        assert explain.returncode == 0, explain.stderr
        assert "node totals" in explain.stdout
        one = ctl(zephonctl, "explain", "--instance", instance["instance_id"], "--json", env=env)
        assert one.returncode == 0, one.stderr
        assert "node totals" in json.loads(one.stdout)["text"]
    finally:
        pipe.close()


def test_unreachable_daemon_exits_4(zephonctl, tmp_path):
    sock = str(tmp_path / "nobody.sock")
    for cmd in (["status", "--socket", sock], ["explain", "--socket", sock],
                ["status", "--address", "127.0.0.1:1", "--timeout-s", "1"]):
        out = ctl(zephonctl, *cmd)
        assert out.returncode == 4, (cmd, out.stdout, out.stderr)
        assert "no zephond answers" in out.stderr


def test_usage_errors_exit_2(zephonctl):
    assert ctl(zephonctl).returncode == 2
    assert ctl(zephonctl, "checkpoint", "inspect").returncode == 2
    assert ctl(zephonctl, "status", "--no-such-flag").returncode == 2
    help_text = ctl(zephonctl, "--help")
    assert help_text.returncode == 0 and "4 daemon unreachable" in help_text.stdout


def test_checkpoint_ls_inspect_verify(zephonctl, corpus, daemon, tmp_path):
    agg = tmp_path / "agg"
    pipe = pipeline(corpus, daemon.socket, canonical_replicas=2, world_size=1, global_rank=0,
                    run_id="ctl-run", aggregate_dir=str(agg))
    it = iter(pipe)
    for _ in range(4):
        next(it)
    state = pipe.checkpoint()
    pipe.close()
    good = agg / "ctl-run" / "checkpoint-00000000.zckpt"
    assert good.read_bytes() == state

    ls = ctl(zephonctl, "checkpoint", "ls", str(agg))
    assert ls.returncode == 0, ls.stderr
    assert "run ctl-run" in ls.stdout and "checkpoint-00000000.zckpt" in ls.stdout
    assert "ok" in ls.stdout
    doc = json.loads(ctl(zephonctl, "checkpoint", "ls", str(agg), "--run", "ctl-run",
                         "--json").stdout)
    (run,) = doc["runs"]
    (entry,) = run["checkpoints"]
    assert run["run_id"] == "ctl-run" and entry["round"] == 0 and entry["ok"]
    assert entry["size_bytes"] == len(state)

    inspect = ctl(zephonctl, "checkpoint", "inspect", str(good))
    assert inspect.returncode == 0, inspect.stderr
    for text in ("ctl-run", "spec_hash", "canonical_replicas (C)", "LANE", "RANK", "TAKEN",
                 "checksum good"):
        assert text in inspect.stdout
    detail = json.loads(ctl(zephonctl, "checkpoint", "inspect", str(good), "--json").stdout)
    s = detail["state"]
    assert s["run_id"] == "ctl-run" and int(s["round"]) == 0
    assert s["canonical_replicas"] == 2 and len(s["lanes"]) == 2
    assert int(s["total_batches"]) == 4 and s["world_size"] == 1
    assert [int(r["taken"]) for r in s["ranks"]] == [4]

    bad = tmp_path / "corrupt.zckpt"
    data = bytearray(state)
    data[-3] ^= 0xFF
    bad.write_bytes(bytes(data))
    ok = ctl(zephonctl, "checkpoint", "verify", str(good))
    assert ok.returncode == 0 and ok.stdout.startswith("OK")
    both = ctl(zephonctl, "checkpoint", "verify", str(good), str(bad))
    assert both.returncode == 1
    lines = both.stdout.splitlines()
    assert lines[0].startswith("OK") and str(good) in lines[0]
    assert lines[1].startswith("BAD") and str(bad) in lines[1]
    assert ctl(zephonctl, "checkpoint", "inspect", str(bad)).returncode == 1

    # A damaged file in the run directory shows up in ls with its verdict.
    shutil.copy(bad, agg / "ctl-run" / "checkpoint-00000001.zckpt")
    doc = json.loads(ctl(zephonctl, "checkpoint", "ls", str(agg), "--json").stdout)
    verdicts = {c["round"]: c["ok"] for c in doc["runs"][0]["checkpoints"]}
    assert verdicts == {0: True, 1: False}


def test_checkpoint_prune_keeps_the_newest_good_ones(zephonctl, corpus, daemon, tmp_path):
    agg = tmp_path / "agg"
    pipe = pipeline(corpus, daemon.socket, canonical_replicas=2, world_size=1, global_rank=0,
                    run_id="prune-run", aggregate_dir=str(agg))
    it = iter(pipe)
    states = []
    for _ in range(4):  # rounds 0..3
        next(it)
        states.append(pipe.checkpoint())
    pipe.close()
    run_dir = agg / "prune-run"
    name = "checkpoint-{:08d}.zckpt".format
    # Round 3 (the newest) is damaged: it must not count as one of the kept good ones.
    (run_dir / name(3)).write_bytes(states[3][:-5])

    dry = ctl(zephonctl, "checkpoint", "prune", str(agg), "--run", "prune-run",
              "--keep-last", "2", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"would delete {run_dir / name(0)}" in dry.stdout
    assert sorted(p.name for p in run_dir.glob("checkpoint-*")) == [name(r) for r in range(4)]

    pruned = ctl(zephonctl, "checkpoint", "prune", str(agg), "--run", "prune-run",
                 "--keep-last", "2")
    assert pruned.returncode == 0, pruned.stderr
    # Kept: the two newest good rounds (1, 2) and the damaged newer one (3).
    assert sorted(p.name for p in run_dir.glob("checkpoint-*")) == [name(r) for r in (1, 2, 3)]
    again = ctl(zephonctl, "checkpoint", "prune", str(agg), "--run", "prune-run",
                "--keep-last", "2")
    assert again.returncode == 0 and "nothing to prune" in again.stdout

    assert ctl(zephonctl, "checkpoint", "prune", str(agg), "--run", "prune-run",
               "--keep-last", "0").returncode == 2
    missing = ctl(zephonctl, "checkpoint", "prune", str(agg), "--run", "nope", "--keep-last", "1")
    assert missing.returncode == 1 and "no run nope" in missing.stderr
    absent = ctl(zephonctl, "checkpoint", "ls", str(tmp_path / "typo"))
    assert absent.returncode == 1 and "is not a directory" in absent.stderr
    assert not (tmp_path / "typo").exists()  # reading never creates the directory


def test_shm_ls_and_gc(zephonctl, corpus, tmp_path):
    d = Daemon(tmp_path)
    target = ["--prefix", d.shm_prefix, "--socket", d.socket]
    pipe = pipeline(corpus, d.socket, canonical_replicas=2)
    try:
        next(iter(pipe))
        (ring,) = d.ring_memfds()
        ls = ctl(zephonctl, "shm", "ls", *target)
        assert ls.returncode == 0, ls.stderr
        assert ring in ls.stdout and "held by a live zephond" in ls.stdout
        assert "memfd" in ls.stdout and "no legacy segments" in ls.stdout
        doc = json.loads(ctl(zephonctl, "shm", "ls", *target, "--json").stdout)
        assert doc["daemon_live"] is True and doc["daemon_pid"] == d.proc.pid
        assert doc["rings_kind"] == "memfd"
        assert sorted(r["name"] for r in doc["rings"]) == [ring, ring + ".cursors"]
        assert all(r["size_bytes"] > 0 for r in doc["rings"])
        assert doc["segments"] == []

        gc = ctl(zephonctl, "shm", "gc", *target)
        assert gc.returncode == 3, (gc.stdout, gc.stderr)
        assert "refused" in gc.stderr and "live zephond" in gc.stderr
        assert d.ring_memfds() == [ring]
    finally:
        pipe.close()
        assert d.stop() == 0

    # A legacy (layout 1) leftover of an older daemon with the same prefix: gc removes it.
    leftover = Path("/dev/shm") / f"{d.shm_prefix}.999999999.0"
    leftover.write_bytes(b"\0" * 4096)
    try:
        doc = json.loads(ctl(zephonctl, "shm", "ls", *target, "--json").stdout)
        assert doc["daemon_live"] is False and doc["rings"] == []
        assert [s["name"] for s in doc["segments"]] == ["/" + leftover.name]
        ls = ctl(zephonctl, "shm", "ls", *target)
        assert "no live zephond: no rings" in ls.stdout and "legacy" in ls.stdout
        gc = ctl(zephonctl, "shm", "gc", *target)
        assert gc.returncode == 0, gc.stderr
        assert "removed 1 segment" in gc.stdout
        assert not leftover.exists() and d.shm_segments() == []
    finally:
        leftover.unlink(missing_ok=True)
