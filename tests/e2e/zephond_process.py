"""A zephond process on a private socket and shm prefix: one simulated node.

Shared by the end-to-end tests (conftest.py) and the benchmarks (tests/bench); it has no
pytest dependency so benchmarks can import it directly.
"""
from __future__ import annotations

import contextlib
import gc
import os
import secrets
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from zephon import _native, daemon_status


ROOT = Path(__file__).resolve().parents[2]


def zephonctl_path() -> str:
    """The zephonctl binary: Bazel's output, else the copy `make build` installs."""
    for path in (ROOT / "bazel-bin/client/zephonctl/zephonctl",
                 ROOT / "client/python/zephon/_native/zephonctl"):
        if path.exists():
            return str(path)
    raise RuntimeError("zephonctl not built: bazel build //client/zephonctl:zephonctl")


_CLUSTER_SECRET: str | None = None


def autostart_env(socket: str, idle_exit_s: float = 1) -> dict:
    """Environment for a trainer subprocess whose client auto-starts zephond at `socket`
    (exiting after `idle_exit_s` without readers)."""
    return dict(os.environ, PYTHONPATH=str(Path(_native.__file__).parents[1]),
                ZEPHON_SOCKET=socket, ZEPHON_IDLE_EXIT_S=str(idle_exit_s))


def one_batch_script(corpus: Path) -> str:
    """Python source that builds Pipeline `p` over the Megatron `corpus` and reads its
    first batch into `b` (2 x 65 tokens); callers append what to do next."""
    return (
        "import os, sys, zephon\n"
        f"ds = zephon.Dataset.from_path('web', {str(corpus)!r}, fmt='megatron')\n"
        "p = zephon.Pipeline(zephon.StaticMixtureWorkSource([ds], chunk_size=32))"
        ".pack_flat(max_length=65).batch(2)\n"
        "b = next(iter(p))\n")


def cluster_secret_file() -> str:
    """The peer secret shared by every test daemon of this process (mode 0400), as the
    daemons of one cluster share a Kubernetes Secret."""
    global _CLUSTER_SECRET
    if _CLUSTER_SECRET is None:
        path = Path(tempfile.mkdtemp(prefix="zephon-secret-")) / "peer-secret"
        path.write_text(secrets.token_hex(32) + "\n")
        path.chmod(0o400)
        _CLUSTER_SECRET = str(path)
    return _CLUSTER_SECRET


def private_dir(path: Path) -> Path:
    """Creates `path` and its missing parents with mode 0700 and makes `path` 0700.

    zephond refuses a runtime directory (its socket's parent) that its group or others can
    write, and a group/world-writable non-sticky directory above it: under umask 002 a plain
    mkdir() makes exactly that. Path.mkdir(parents=True) ignores `mode` for the parents, so
    each missing one is made here."""
    missing = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        directory.mkdir(mode=0o700, exist_ok=True)
        directory.chmod(0o700)  # mkdir's mode is masked by the umask
    path.chmod(0o700)
    return path


class Daemon:
    """A zephond on a private socket and shm prefix: one simulated node.

    With `peer` (the default) it serves peers on a loopback port, authenticated by the
    shared cluster_secret_file(), as a node of a multi-node cluster; `peer=False` runs it
    as a single-node daemon with no peer port."""

    def __init__(self, workdir: Path, extra_args: list[str] | None = None, peer: bool = True,
                 wrapper: list[str] | None = None):
        self.workdir = private_dir(workdir)
        self.socket = str(workdir / "zephond.sock")
        self.log = workdir / "zephond.log"
        self.shm_prefix = f"zt{uuid.uuid4().hex[:10]}"
        self.extra_args = list(extra_args or [])
        # Runs the daemon through this command, e.g. ["ip", "netns", "exec", "zt-a"]
        # (which execs it: the pid stays the daemon's).
        self.wrapper = list(wrapper or [])
        if peer and not any(a.startswith("--peer-address") for a in self.extra_args):
            self.extra_args += ["--peer-address", "127.0.0.1:0",
                                "--peer-secret-file", cluster_secret_file()]
        self.start()

    def start(self) -> None:
        """Starts (or, after a crash, restarts) the daemon with the same socket and prefix."""
        binary = _native.zephond_path()
        if not binary:
            raise RuntimeError("zephond not built; run `make build`")
        started_before = self._listening_lines()
        self.proc = subprocess.Popen(self.wrapper + [binary, "--socket", self.socket, "--shm-prefix",
                                      self.shm_prefix, "--log-file", str(self.log)]
                                     + self.extra_args,
                                     stdout=subprocess.DEVNULL,
                                     stderr=open(self.workdir / "zephond.stderr", "a"))
        deadline = time.monotonic() + 15
        while self._listening_lines() == started_before:
            if self.proc.poll() is not None:
                raise RuntimeError(f"zephond exited: {self.log.read_text()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"zephond did not start listening; see {self.log}")
            time.sleep(0.02)

    def _listening_lines(self) -> int:
        return self.log.read_text().count("listening on") if self.log.exists() else 0

    def _memfd_name(self, target: str) -> str | None:
        """The memfd name of this daemon's ring in a /proc fd link or maps path, else None."""
        if not target.startswith(f"/memfd:{self.shm_prefix}."):
            return None
        return target[len("/memfd:"):].removesuffix(" (deleted)")

    def _ring_fds(self) -> list[tuple[str, str]]:
        """(/proc/<pid>/fd/<n>, memfd name) of every data and cursor memfd of this prefix
        the live daemon holds. Fds closed while this looks are skipped: a detach tears
        down asynchronously."""
        if self.proc.poll() is not None:
            return []
        fd_dir = f"/proc/{self.proc.pid}/fd"
        try:
            entries = os.listdir(fd_dir)
        except OSError:
            return []
        fds = []
        for entry in entries:
            try:
                name = self._memfd_name(os.readlink(f"{fd_dir}/{entry}"))
            except OSError:
                continue
            if name is not None:
                fds.append((f"{fd_dir}/{entry}", name))
        return fds

    def ring_memfds(self) -> list[str]:
        """Names of the rings the live daemon holds: the data memfd of each (ring layout 2
        rings have no /dev/shm name; they show in /proc/<pid>/fd as "/memfd:<name>")."""
        return sorted({name for _, name in self._ring_fds() if not name.endswith(".cursors")})

    def ring_memfd_bytes(self) -> int:
        """Bytes of ring memory the live daemon holds open: the size of each distinct data
        and cursor memfd of this prefix among its fds (0 once every ring is freed)."""
        sizes = {}
        for fd_path, _ in self._ring_fds():
            try:
                st = os.stat(fd_path)  # follows the link to the memfd itself
            except OSError:
                continue  # closed since it was listed
            sizes[(st.st_dev, st.st_ino)] = st.st_size
        return sum(sizes.values())

    def wait_no_ring_memfds(self, deadline_s: float = 5) -> list[str]:
        """Waits up to `deadline_s` for the daemon to close every ring memfd (it frees a ring
        asynchronously once its last reader detached); returns the names still held."""
        deadline = time.monotonic() + deadline_s
        while True:
            held = sorted({name for _, name in self._ring_fds()})
            if not held or time.monotonic() > deadline:
                return held
            time.sleep(0.05)

    def mapped_rings(self, pid: int | str = "self") -> list[str]:
        """Names of this daemon's ring memfds (data and cursors) mapped in process `pid`
        (default: this one). A memfd's memory is freed once no fd and no mapping holds it,
        so after a reader closes, this is how to see that it let go."""
        names = set()
        with open(f"/proc/{pid}/maps") as maps:
            for line in maps:
                fields = line.split(maxsplit=5)
                if len(fields) == 6:
                    name = self._memfd_name(fields[5].rstrip("\n"))
                    if name is not None:
                        names.add(name)
        return sorted(names)

    def legacy_shm_segments(self) -> list[str]:
        """Layout-1 segments of this prefix in /dev/shm (zephond creates none any more)."""
        return [n for n in os.listdir("/dev/shm") if n.startswith(self.shm_prefix + ".")]

    def shm_segments(self) -> list[str]:
        """Every ring of this daemon: its live memfds, plus anything in /dev/shm."""
        return self.ring_memfds() + self.legacy_shm_segments()

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def status(self) -> dict:
        return daemon_status(self.socket)

    def cpu_s(self) -> float:
        """CPU seconds the daemon used so far (its own clock, ns resolution)."""
        return float(self.status()["process_cpu_s"])


@contextlib.contextmanager
def default_daemon(workdir: Path, *, check_rings_freed: bool = True):
    """A single-node Daemon that code which never passes ``daemon=`` reaches: ZEPHON_SOCKET
    names it while the block runs. On exit the old ZEPHON_SOCKET comes back, dropped
    Pipelines are collected (they detach), and the daemon must have freed every ring
    (with `check_rings_freed`) and must stop with status 0."""
    d = Daemon(workdir, peer=False)
    before = os.environ.get("ZEPHON_SOCKET")
    os.environ["ZEPHON_SOCKET"] = d.socket
    try:
        yield d
    finally:
        if before is None:
            os.environ.pop("ZEPHON_SOCKET", None)
        else:
            os.environ["ZEPHON_SOCKET"] = before
        gc.collect()
        held = d.wait_no_ring_memfds(deadline_s=5) if check_rings_freed else []
        rc = d.stop()
        assert held == [], f"zephond still holds rings {held} after the pipelines were dropped"
        assert rc == 0, f"zephond exited with {rc}; log:\n{d.log.read_text()}"
