"""The client's one-time setup at `import zephon` (issue 18, first batch): gRPC's and
protobuf's initialization runs on a thread of its own (zephon_warm_up), leaves no gRPC
thread behind, and a fork made through Python waits for it, so a child (a rank started
with multiprocessing, a DataLoader worker) never inherits gRPC half-initialized."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "client" / "python"


def run(code: str, **env: str) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)],
                         env=dict(os.environ, PYTHONPATH=str(PACKAGE), **env),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return out


def test_import_warms_up_on_a_thread_that_leaves_none_behind():
    out = run("""
        import os, threading, time
        import numpy  # its own threads, if any, before counting
        before = len(os.listdir("/proc/self/task"))
        import zephon
        warm = [t for t in threading.enumerate() if t.name == "zephon-warm-up"]
        for t in warm:
            t.join(timeout=30)
        deadline = time.monotonic() + 10  # a thread's exit may lag its join a little
        while len(os.listdir("/proc/self/task")) > before and time.monotonic() < deadline:
            time.sleep(0.01)
        print("new tasks", len(os.listdir("/proc/self/task")) - before)
    """)
    # The thread may already have finished by the time import returns; either way no
    # thread of gRPC's is left once it has.
    assert "new tasks 0" in out.stdout, out.stdout


def test_zephon_warm_up_0_turns_it_off():
    out = run("""
        import threading
        import zephon
        print("warm-up threads",
              sum(t.name == "zephon-warm-up" for t in threading.enumerate()))
    """, ZEPHON_WARM_UP="0")
    assert "warm-up threads 0" in out.stdout


def test_a_fork_right_after_import_waits_for_the_warm_up_and_the_child_attaches(corpus,
                                                                                 daemon):
    out = run(f"""
        import os, threading, time
        import zephon
        from zephon import _native
        # A warm-up slow enough that the fork below surely comes while it runs (imported
        # with ZEPHON_WARM_UP=0, then started by hand through a slowed library).
        real = _native.LIB

        class Slowed:
            def __getattr__(self, name):
                return getattr(real, name)

            def zephon_warm_up(self):
                time.sleep(0.5)
                real.zephon_warm_up()

        _native.LIB = Slowed()
        os.environ["ZEPHON_WARM_UP"] = "1"
        _native._start_warm_up()
        _native.LIB = real
        warm = [t for t in threading.enumerate() if t.name == "zephon-warm-up"]
        assert warm and warm[0].is_alive()

        def first_batch():
            ds = zephon.Dataset.from_path("web", {str(corpus)!r}, fmt="megatron")
            pipe = (zephon.Pipeline(zephon.StaticMixtureWorkSource([ds], seed=3))
                    .pack_flat(max_length=65).batch(2).options(daemon={daemon.socket!r}))
            shape = next(iter(pipe))["tokens"].shape
            pipe.close()
            return shape

        t = time.monotonic()
        pid = os.fork()
        if pid == 0:
            try:
                ok = first_batch() == (2, 65)
            except BaseException as e:
                print("child failed:", e, flush=True)
                ok = False
            os._exit(0 if ok else 1)
        # The at-fork hook joined the warm-up before the fork.
        print("fork waited:", time.monotonic() - t > 0.3)
        print("warm-up alive after fork:", any(w.is_alive() for w in warm))
        deadline = time.monotonic() + 60
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, 9)
                raise SystemExit("the forked child hung attaching")
            time.sleep(0.01)
        print("child exit", os.waitstatus_to_exitcode(status))
        print("parent", first_batch())
    """, ZEPHON_WARM_UP="0")
    assert "fork waited: True" in out.stdout, out.stdout
    assert "warm-up alive after fork: False" in out.stdout, out.stdout
    assert "child exit 0" in out.stdout, out.stdout
    assert "parent (2, 65)" in out.stdout, out.stdout
