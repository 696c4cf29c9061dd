"""The client's probe of the daemon socket (client/connection.cc) keeps its deadline
against a listener that never accepts (a wedged daemon whose backlog is full): the call
fails with DaemonUnavailableError naming the socket instead of hanging."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "client" / "python"


def test_a_listener_with_a_full_backlog_gets_an_error_not_a_hang(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    path = str(run_dir / "zephond.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(0)  # never accepted: the backlog fills at once
    fillers = []
    try:
        for _ in range(4):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.setblocking(False)
            try:
                s.connect(path)
            except BlockingIOError:
                pass  # full already
            fillers.append(s)
        code = textwrap.dedent(f"""
            import time, zephon
            t = time.monotonic()
            try:
                zephon.daemon_status({path!r}, timeout_s=2.0)
                print("answered?")
            except zephon.errors.ZephonError as e:
                print(type(e).__name__, round(time.monotonic() - t, 1), e)
        """)
        out = subprocess.run([sys.executable, "-c", code],
                             env=dict(os.environ, PYTHONPATH=str(PACKAGE)),
                             capture_output=True, text=True, timeout=60)
    finally:
        for s in fillers:
            s.close()
        listener.close()
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("DaemonUnavailableError"), out.stdout
    assert path in out.stdout


def test_an_auto_started_daemon_that_exits_is_an_error_within_seconds(tmp_path):
    """The socket file of a running zephond was deleted (a tmp cleaner, a careless
    `rm`): the client finds no listener and starts a daemon, which exits at once because
    the running one holds the socket's lock. The client says so, with the daemon's own
    words, instead of waiting out its whole attach timeout (60 s)."""
    from zephon import _native

    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    path = str(run_dir / "zephond.sock")
    first = subprocess.Popen([_native.zephond_path(), "--socket", path, "--idle-exit-s", "60",
                              "--metrics-address", ""],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not os.path.exists(path):
            assert time.monotonic() < deadline, "zephond did not listen"
            assert first.poll() is None, "zephond exited"
            time.sleep(0.02)
        os.unlink(path)  # the daemon lives on, holding <socket>.lock
        code = textwrap.dedent(f"""
            import time, zephon
            t = time.monotonic()
            try:
                ds = zephon.Dataset.from_path("web", "/nonexistent/corpus", fmt="megatron")
                p = zephon.Pipeline(zephon.StaticMixtureWorkSource([ds])).batch(2)
                p.options(daemon={path!r}, attach_timeout_s=60).attach()
                print("attached?")
            except zephon.errors.ZephonError as e:
                print(type(e).__name__, round(time.monotonic() - t, 1), e)
        """)
        out = subprocess.run([sys.executable, "-c", code],
                             env=dict(os.environ, PYTHONPATH=str(PACKAGE)),
                             capture_output=True, text=True, timeout=120)
    finally:
        first.kill()
        first.wait()
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("DaemonUnavailableError"), out.stdout
    seconds = float(out.stdout.split()[1])
    # The deadline was 60 s; a live lock holder that does not listen gets 10 s.
    assert seconds < 30, out.stdout
    assert "exited without listening" in out.stdout, out.stdout
    assert "another zephond holds" in out.stdout, out.stdout  # the daemon's own reason
    assert f"zephond pid {first.pid} holds" in out.stdout, out.stdout
    assert f"kill {first.pid}" in out.stdout, out.stdout
    assert f"{path}.log" in out.stdout, out.stdout
