"""The shared-memory transport under crashes, forks, hostile readers, small /dev/shm and
permissions — with real processes: SIGKILLed ranks, a SIGKILLed daemon, forked children, a
reader that tries to truncate its ring."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

import zephon
from conftest import Daemon, pipeline, private_dir

HERE = Path(__file__).resolve().parent
GROUP = dict(world_size=2, dp_degree=1, dp_group_id=0, run_id="crash", aggregate_dir="/tmp/a")


class RankProcess:
    def __init__(self, corpus, socket, **options):
        env = dict(os.environ, PYTHONPATH=str(Path(zephon.__file__).parents[1]))
        cfg = json.dumps({"corpus": str(corpus), "socket": socket, "options": options})
        self.proc = subprocess.Popen([sys.executable, str(HERE / "rank_proc.py"), cfg],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env=env)
        assert self.line() == "attached"

    def line(self) -> str:
        return self.proc.stdout.readline().strip()

    def read(self, n: int) -> list[str]:
        self.proc.stdin.write(f"read {n}\n")
        self.proc.stdin.flush()
        out = [self.line() for _ in range(n)]
        assert self.line() == "ok", out
        return out

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


def hashes(pipe, n):
    it = iter(pipe)
    return [hashlib.sha256(next(it)["tokens"].tobytes()).hexdigest()[:16] for _ in range(n)]


def test_stopped_peer_is_named_when_its_group_times_out(daemon, corpus):
    # A SIGSTOPped rank is alive but never releases: its DP-group peer's read times out,
    # and the error names the stopped rank rather than only "not published".
    waiting = pipeline(corpus, daemon.socket, global_rank=0, read_timeout_s=2,
                       prefetch_batches=2, **GROUP)
    stopped = RankProcess(corpus, daemon.socket, global_rank=1, **GROUP)
    try:
        stopped.read(1)
        os.kill(stopped.proc.pid, signal.SIGSTOP)
        with pytest.raises(zephon.ZephonTimeoutError) as err:
            it = iter(waiting)
            for _ in range(1000):
                next(it)
        message = str(err.value)
        assert f"global_rank 1 (pid {stopped.proc.pid}, reader" in message, message
        assert "has not released" in message, message
    finally:
        os.kill(stopped.proc.pid, signal.SIGCONT)
        stopped.kill()
        waiting.close()


def test_killed_reader_poisons_its_ring_and_names_the_rank(daemon, corpus):
    survivor = pipeline(corpus, daemon.socket, global_rank=0, **GROUP)
    victim = RankProcess(corpus, daemon.socket, global_rank=1, **GROUP)
    other = pipeline(corpus, daemon.socket, run_id="bystander")  # another instance
    assert victim.read(2) == hashes(survivor, 2)
    other_before = hashes(other, 2)

    victim.kill()
    killed_at = time.monotonic()
    with pytest.raises(zephon.PeerLostError, match="rank 1") as err:
        it = iter(survivor)
        while True:
            next(it)
    detected_s = time.monotonic() - killed_at
    print(f"peer death seen by the survivor after {detected_s * 1000:.0f} ms")
    assert detected_s < 2.0, "the daemon should notice a dead reader within about 1 s"
    assert "died" in str(err.value)

    # Other instances keep serving, and continue their own stream.
    assert len(hashes(other, 3)) == 3 and other_before
    survivor.close()
    other.close()
    deadline = time.monotonic() + 5
    while daemon.shm_segments():
        assert time.monotonic() < deadline, f"leaked segments {daemon.shm_segments()}"
        time.sleep(0.05)


def test_killed_daemon_fails_reads_in_bounded_time_and_leaves_no_ring(corpus, tmp_path):
    d = Daemon(tmp_path)
    reader = pipeline(corpus, d.socket, daemon_timeout_s=1.0)
    hashes(reader, 1)
    ring = d.ring_memfds()
    assert len(ring) == 1 and d.ring_memfd_bytes() > 0, ring
    assert ring[0] in d.mapped_rings(), "the reader should map the ring the daemon holds"
    assert d.legacy_shm_segments() == []  # rings are memfds: no /dev/shm name
    d.proc.send_signal(signal.SIGKILL)
    d.proc.wait()
    killed_at = time.monotonic()
    with pytest.raises(zephon.DaemonUnavailableError, match="zephond"):
        it = iter(reader)
        for _ in range(100):  # at most the ring's prefetched batches come first
            next(it)
    waited = time.monotonic() - killed_at
    print(f"reader noticed the dead daemon after {waited * 1000:.0f} ms")
    assert waited < 1.0 + 3.0
    # The SIGKILLed daemon's fds are gone; the reader's mapping is now all that keeps the
    # ring's memory, and nothing has a name anywhere that could outlive it.
    assert d.legacy_shm_segments() == []
    assert ring[0] in d.mapped_rings(), "the reader let go of its ring before close()"
    reader.close()
    assert d.mapped_rings() == [], "close() after the daemon died left the ring mapped"

    # A layout-1 segment an older zephond left with this prefix is still swept on start.
    legacy = Path("/dev/shm") / f"{d.shm_prefix}.999999999.0"
    legacy.write_bytes(b"\0" * 4096)
    try:
        d.start()  # same socket and shm prefix
        assert d.shm_segments() == []
        fresh = pipeline(corpus, d.socket)
        assert len(hashes(fresh, 2)) == 2
        fresh.close()
        assert d.wait_no_ring_memfds() == []
        assert d.stop() == 0
        assert "swept 1 legacy /dev/shm segment" in d.log.read_text()
    finally:
        legacy.unlink(missing_ok=True)


def test_hostile_reader_cannot_shrink_its_ring_and_the_daemon_keeps_serving(corpus, tmp_path):
    """Issue 12: a reader (a --shm-group member, with write access for its cursor) ran
    ftruncate(4096) on a live ring; zephond and every reader of the node died of SIGBUS.
    Now a reader holds the batch area read-only and both segments are sealed: every
    attempt fails, and the daemon, its peer rank and another job keep reading."""
    d = Daemon(tmp_path)
    honest = pipeline(corpus, d.socket, global_rank=0, **GROUP)
    hostile = RankProcess(corpus, d.socket, global_rank=1, **GROUP)
    bystander = pipeline(corpus, d.socket, run_id="bystander")
    try:
        assert hostile.read(2) == hashes(honest, 2)
        hostile.proc.stdin.write("attack\n")
        hostile.proc.stdin.flush()
        line = hostile.line()
        assert line.startswith("attack "), line
        report = json.loads(line[len("attack "):])
        assert hostile.line() == "ok"
        # It holds the ring (data and cursor memfds) and could do nothing harmful with it.
        assert any(d.shm_prefix in m and ".cursors" not in m for m in report["memfds"]), report
        assert any(".cursors" in m for m in report["memfds"]), report
        assert report["succeeded"] == [], report
        # Everyone keeps going: the daemon, the hostile rank itself, its peer, another job.
        assert d.proc.poll() is None
        assert hostile.read(3) == hashes(honest, 3)
        assert len(hashes(bystander, 3)) == 3
        assert d.status()["instances"]
    finally:
        hostile.kill()
        honest.close()
        bystander.close()
    assert d.stop() == 0
    assert "SIGBUS" not in d.log.read_text()


def test_daemon_sigterm_closes_rings_without_blaming_peers(corpus, tmp_path):
    d = Daemon(tmp_path)
    a = pipeline(corpus, d.socket, global_rank=0, **GROUP)
    b = pipeline(corpus, d.socket, global_rank=1, **GROUP)
    assert hashes(a, 2) == hashes(b, 2)
    assert d.stop() == 0
    for p in (a, b):
        with pytest.raises(zephon.DaemonUnavailableError):
            it = iter(p)
            for _ in range(100):
                next(it)
        p.close()
    assert d.mapped_rings() == [] and d.legacy_shm_segments() == []


def test_second_daemon_on_the_same_socket_is_refused(daemon):
    out = subprocess.run([zephon._native.zephond_path(), "--socket", daemon.socket],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 3
    assert "another zephond holds" in out.stderr


def test_ring_budget_error_says_what_is_needed(corpus, tmp_path):
    d = Daemon(tmp_path, extra_args=["--max-ring-bytes", str(1 << 20)])
    pipe = pipeline(corpus, d.socket, max_length=4097, microbatch=8)
    with pytest.raises(zephon.ResourceExhaustedError, match=r"--max-ring-bytes=1048576"):
        pipe.attach()
    small = pipeline(corpus, d.socket, max_length=65, microbatch=2)
    assert len(hashes(small, 2)) == 2
    small.close()
    assert d.stop() == 0


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="needs root and unshare for a private /dev/shm")
def test_small_dev_shm_does_not_limit_rings(corpus, tmp_path):
    """Rings are memfds: a container's small /dev/shm (Docker's 64 MiB default, here
    256 KiB) no longer caps them; only the memory limit and --max-ring-bytes do."""
    socket = str(tmp_path / "zephond.sock")
    log = tmp_path / "zephond.log"
    script = ('mount -t tmpfs -o size=256k tmpfs /dev/shm && exec "$0" --socket "$1" '
              '--log-file "$2"')
    proc = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                             script, zephon._native.zephond_path(), socket, str(log)])
    try:
        deadline = time.monotonic() + 15
        while not os.path.exists(socket):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        pipe = pipeline(corpus, socket, max_length=2049, microbatch=8)  # a ~1 MiB ring
        try:
            assert len(hashes(pipe, 2)) == 2
            ring_bytes = int(zephon.daemon_status(socket)["instances"][0]["ring_bytes"])
            assert ring_bytes > 256 * 1024
        finally:
            pipe.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0


def ring_fd_modes(d: Daemon) -> list[int]:
    """Permission bits of the ring memfds the daemon holds."""
    modes = []
    for entry in os.listdir(f"/proc/{d.proc.pid}/fd"):
        path = f"/proc/{d.proc.pid}/fd/{entry}"
        try:
            if os.readlink(path).startswith(f"/memfd:{d.shm_prefix}."):
                modes.append(stat.S_IMODE(os.stat(path).st_mode))
        except OSError:
            continue
    return modes


def test_sockets_are_private_by_default_and_group_shared_on_request(corpus, tmp_path):
    """Access to rings is decided when their descriptors are handed over: the hand-off
    socket has the main socket's mode and group, and the memfds are owner-only."""
    d = Daemon(private_dir(tmp_path / "private"))
    p = pipeline(corpus, d.socket)
    hashes(p, 1)
    assert len(d.ring_memfds()) == 1
    assert set(ring_fd_modes(d)) == {0o600}
    assert stat.S_IMODE(os.stat(d.socket).st_mode) == 0o600
    handoff = os.stat(d.socket + ".fds")
    assert stat.S_ISSOCK(handoff.st_mode) and stat.S_IMODE(handoff.st_mode) == 0o600
    p.close()
    assert d.stop() == 0
    assert not os.path.exists(d.socket + ".fds")

    g = Daemon(private_dir(tmp_path / "group"), extra_args=["--shm-group", "root"])
    p = pipeline(corpus, g.socket)
    hashes(p, 1)
    for path in (g.socket, g.socket + ".fds"):
        st = os.stat(path)
        assert stat.S_IMODE(st.st_mode) == 0o660 and st.st_gid == 0, path
    p.close()
    assert g.stop() == 0


def test_forked_child_never_touches_its_parents_loans(daemon, corpus):
    pipe = pipeline(corpus, daemon.socket)
    it = iter(pipe)
    first = next(it)
    expected_second = None
    pid = os.fork()
    if pid == 0:  # child: every use of the parent's reader must fail, nothing released
        code = 0
        try:
            try:
                next(it)
                code = 10
            except RuntimeError as e:
                code = 0 if "another process" in str(e) or "fork" in str(e) else 11
            first.close()  # a no-op in the child
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    # The parent's loan is intact and the stream continues in order.
    assert first.seq == 0 and not first.released
    expected_second = next(it)
    assert expected_second.seq == 1
    pipe.close()


def test_several_open_loans_released_out_of_order(daemon, corpus):
    reference = pipeline(corpus, daemon.socket, run_id="reference")
    want = hashes(reference, 6)
    reference.close()
    pipe = pipeline(corpus, daemon.socket, run_id="loans", max_open_batches=3)
    it = iter(pipe)
    held = [next(it) for _ in range(3)]
    assert [b.seq for b in held] == [0, 1, 2]
    assert all(not b.released for b in held)
    held[2].close()
    held[0].close()
    got = [hashlib.sha256(b["tokens"].tobytes()).hexdigest()[:16] for b in [held[1]]]
    rest = [hashlib.sha256(next(it)["tokens"].tobytes()).hexdigest()[:16] for _ in range(3)]
    assert got + rest == want[1:2] + want[3:6]
    assert held[1].released  # the iterator took the oldest loan back
    pipe.close()
    too_many = pipeline(corpus, daemon.socket, run_id="toomany", max_open_batches=8,
                        prefetch_batches=8)
    with pytest.raises(zephon.InvalidOptionError, match="max_open_batches=8"):
        next(iter(too_many))
    too_many.close()


def test_released_counts_closed_batches_and_delivered_is_its_alias(daemon, corpus):
    from zephon import _native
    pipe = pipeline(corpus, daemon.socket, run_id="released", max_open_batches=3)
    it = iter(pipe)
    held = [next(it) for _ in range(3)]
    handle = pipe._attach().mapping.handle

    def counts():
        with pytest.warns(DeprecationWarning, match="use Pipeline.released"):
            delivered = pipe.delivered
        return (pipe.released, delivered, _native.LIB.zephon_released(handle),
                _native.LIB.zephon_delivered(handle))

    assert counts() == (0, 0, 0, 0)  # three taken, none released
    held[1].close()
    assert counts() == (0, 0, 0, 0)  # seq 0 still on loan: the count is a prefix
    held[0].close()
    assert counts() == (2, 2, 2, 2)
    held[2].close()
    assert counts() == (3, 3, 3, 3)
    pipe.close()
