"""The client's probe of the daemon socket (client/connection.cc) keeps its deadline
against a listener that never accepts (a wedged daemon whose backlog is full): the call
fails with DaemonUnavailableError naming the socket instead of hanging."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
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
