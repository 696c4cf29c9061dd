"""Issue 12 §1: who may talk to zephond over the network. A single-node daemon opens no
peer port; a peer port needs authentication (shared secret, mutual TLS, or an explicit
--peer-insecure); signed calls only; a leader without peer service is a prompt error."""
from __future__ import annotations

import json
import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import zephon
from test_checkpoint import Job
from zephond_process import (Daemon, autostart_env, cluster_secret_file, one_batch_script,
                             zephonctl_path)


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    return inodes


def tcp_listeners(pid: int) -> list[str]:
    """Local addresses (hex, as /proc/net/tcp writes them) of the TCP sockets `pid` listens on."""
    mine = _socket_inodes(pid)
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in mine:  # 0A = LISTEN
                    out.append(fields[1])
    return out


def test_single_node_daemon_opens_no_peer_port(tmp_path):
    d = Daemon(tmp_path, ["--metrics-address", ""], peer=False)
    try:
        assert d.status()["peer_address"] == ""
        assert tcp_listeners(d.proc.pid) == []
        assert "no peer service (no TCP port)" in d.log.read_text()
    finally:
        assert d.stop() == 0


def test_auto_started_daemon_opens_no_tcp_port(corpus, tmp_path):
    socket = str(tmp_path / "auto" / "zephond.sock")
    env = autostart_env(socket, idle_exit_s=2)
    script = one_batch_script(corpus) + (
        f"pid = int(open({socket + '.lock'!r}).read())\n"
        "print(pid); sys.stdout.flush(); sys.stdin.readline(); p.close()\n")
    proc = subprocess.Popen(["/usr/bin/python3", "-c", script], env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        pid = int(proc.stdout.readline())
        assert tcp_listeners(pid) == [], "an auto-started zephond listens on TCP"
    finally:
        proc.communicate("\n", timeout=60)
    assert proc.returncode == 0


def _start(tmp_path, args) -> subprocess.CompletedProcess:
    from zephon import _native
    return subprocess.run([_native.zephond_path(), "--socket", str(tmp_path / "z.sock"),
                           "--shm-prefix", "ztsec", *args], capture_output=True, text=True,
                          timeout=30)


def test_a_peer_port_without_authentication_is_refused(tmp_path):
    out = _start(tmp_path, ["--peer-address", "127.0.0.1:0"])
    assert out.returncode == 2, out.stderr
    for fix in ("--peer-secret-file", "--peer-tls-ca", "--peer-insecure"):
        assert fix in out.stderr
    assert not (tmp_path / "z.sock").exists()


def test_bad_peer_secret_files_are_refused(tmp_path):
    world_readable = tmp_path / "open-secret"
    world_readable.write_text("k" * 64)
    world_readable.chmod(0o644)
    out = _start(tmp_path, ["--peer-address", "127.0.0.1:0",
                            "--peer-secret-file", str(world_readable)])
    assert out.returncode == 2 and "chmod 0400" in out.stderr, out.stderr
    short = tmp_path / "short-secret"
    short.write_text("short\n")
    short.chmod(0o400)
    out = _start(tmp_path, ["--peer-address", "127.0.0.1:0", "--peer-secret-file", str(short)])
    assert out.returncode == 2 and "openssl rand" in out.stderr, out.stderr
    out = _start(tmp_path, ["--peer-address", "127.0.0.1:0", "--peer-insecure",
                            "--peer-secret-file", cluster_secret_file()])
    assert out.returncode == 2 and "contradicts" in out.stderr, out.stderr


def test_peer_insecure_is_explicit_and_logged(tmp_path):
    d = Daemon(tmp_path, ["--peer-address", "127.0.0.1:0", "--peer-insecure"])
    try:
        assert d.status()["peer_address"].startswith("127.0.0.1:")
        assert "INSECURE: no peer authentication" in d.log.read_text()
    finally:
        assert d.stop() == 0


def test_a_run_on_one_node_checkpoints_without_any_peer_port(corpus, tmp_path):
    d = Daemon(tmp_path / "solo", ["--metrics-address", ""], peer=False)
    agg = tmp_path / "agg"
    job = Job(corpus, [d], dp=2, peers=1, run_id="solo", agg=agg)
    try:
        job.step()
        states = job.checkpoint()
        assert states[0] == states[1]
        assert (agg / "solo" / "checkpoint-00000000.zckpt").exists()
        assert "peer_service=none" in (agg / "solo" / "leader").read_text()
        assert tcp_listeners(d.proc.pid) == []
    finally:
        job.close()
        assert d.stop() == 0


def test_a_follower_of_a_leader_without_peer_service_fails_promptly(corpus, tmp_path):
    leader = Daemon(tmp_path / "leader", peer=False)
    follower = Daemon(tmp_path / "follower")
    agg = tmp_path / "agg"
    job = Job(corpus, [leader, follower], dp=2, peers=1, run_id="nopeer", agg=agg, timeout=8.0)
    try:
        job.step()
        start = time.monotonic()
        with ThreadPoolExecutor(2) as pool:
            leader_call = pool.submit(job.pipes[0].checkpoint)
            with pytest.raises(zephon.ZephonError) as follower_error:
                pool.submit(job.pipes[1].checkpoint).result(timeout=60)
            # The follower learns at once from the leader file; it does not poll until
            # its 8 s round deadline.
            assert time.monotonic() - start < 6, "the follower polled instead of failing"
            assert "serves no peers" in str(follower_error.value)
            assert "--peer-address" in str(follower_error.value)
            # The leader cannot hear from it and times out naming the missing rank.
            with pytest.raises(zephon.ZephonError) as leader_error:
                leader_call.result(timeout=60)
            assert "ranks [1]" in str(leader_error.value)
        assert not list((agg / "nopeer").glob("checkpoint-*"))
    finally:
        job.close()
        for d in (leader, follower):
            assert d.stop() == 0


def test_a_follower_with_another_secret_is_refused(corpus, tmp_path):
    leader = Daemon(tmp_path / "leader")
    other = tmp_path / "other-secret"
    other.write_text("x" * 64)
    other.chmod(0o400)
    rogue = Daemon(tmp_path / "rogue", ["--peer-address", "127.0.0.1:0",
                                        "--peer-secret-file", str(other)])
    agg = tmp_path / "agg"
    job = Job(corpus, [leader, rogue], dp=2, peers=1, run_id="rogue", agg=agg, timeout=3.0)
    try:
        job.step()
        errors = job.checkpoint_fails()
        assert any("wrong signature" in e for e in errors), errors
        assert not list((agg / "rogue").glob("checkpoint-*"))
        assert "refused a checkpoint report" in leader.log.read_text()
    finally:
        job.close()
        for d in (leader, rogue):
            assert d.stop() == 0


def test_status_over_the_peer_port_needs_the_secret_and_is_redacted(corpus, tmp_path):
    d = Daemon(tmp_path)
    try:
        address = d.status()["peer_address"]
        ctl = [zephonctl_path(), "status", "--address", address, "--json", "--timeout-s", "5"]
        refused = subprocess.run(ctl, capture_output=True, text=True, timeout=30)
        assert refused.returncode != 0
        assert "x-zephon-auth" in refused.stderr, refused.stderr
        ok = subprocess.run(ctl + ["--peer-secret-file", cluster_secret_file()],
                            capture_output=True, text=True, timeout=30)
        assert ok.returncode == 0, ok.stderr
        status = json.loads(ok.stdout)["status"]
        assert int(status.get("pid", 0)) == 0
        assert status.get("socket", "") == "" and status.get("shm_prefix", "") == ""
        assert int(status["uptime_s"]) >= 0  # what an operator needs is still there
    finally:
        assert d.stop() == 0
