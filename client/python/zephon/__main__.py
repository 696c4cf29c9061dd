"""``python -m zephon --version`` and ``python -m zephon doctor``.

``doctor`` checks what a rank needs before it can read a batch, and prints what it found,
one line per check ("ok", "warn" or "FAIL", then the detail and, for a problem, the fix):
the native client library and its C API version, the zephond and zephonctl binaries
(the ones this package would auto-start), the daemon socket (its directory private to
this user) and whether a daemon answers there, and the size of /dev/shm. ``--start``
starts a daemon when none answers (as the first attach would). Exit status: 0 when
nothing failed, 1 otherwise.
"""
from __future__ import annotations

import argparse
import os
import stat
import sys
from pathlib import Path
from typing import Any, Callable, List, Optional, Tuple

from ._version import __version__

# Below this, /dev/shm holds only a few rings of long rows (a container's default 64 MiB
# is the classic surprise): warn.
_SHM_WARN_BYTES = 1 << 30

Check = Tuple[str, str, str]  # (status, what, detail)


def default_socket() -> str:
    """The socket a client connects to when none is given (common/paths.h)."""
    if os.environ.get("ZEPHON_SOCKET"):
        return os.environ["ZEPHON_SOCKET"]
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return os.path.join(runtime, "zephon", "zephond.sock")
    return f"/tmp/zephon-{os.getuid()}/zephond.sock"


def _native_checks() -> List[Check]:
    out: List[Check] = []
    try:
        from . import _native
    except ImportError as e:
        return [("FAIL", "native library", f"{e}")]
    version = int(_native.LIB.zephon_c_api_version())
    out.append(("ok", "native library",
                f"{_native.library_path()} (C API version {version}, this package needs "
                f"{_native.C_API_VERSION})"))
    daemon = _native.zephond_path()
    out.append(("ok", "zephond", daemon) if daemon else
               ("FAIL", "zephond", "not found: run `make build` (or set ZEPHOND); without it "
                                   "a rank cannot auto-start the daemon"))
    ctl = Path(_native.library_path()).with_name("zephonctl")
    out.append(("ok", "zephonctl", str(ctl)) if ctl.is_file() else
               ("warn", "zephonctl", f"not next to the library ({ctl}); `make build` installs "
                                     "it there"))
    return out


def _socket_checks(socket: str, start: bool) -> List[Check]:
    out: List[Check] = []
    directory = os.path.dirname(socket)
    try:
        st = os.stat(directory)
        private = stat.S_IMODE(st.st_mode) & 0o077 == 0 and st.st_uid == os.getuid()
        out.append(("ok" if private else "FAIL", "socket directory",
                    f"{directory} (mode {stat.S_IMODE(st.st_mode):o}, uid {st.st_uid})" +
                    ("" if private else ": zephond refuses a socket directory that is not "
                                        "0700 and this user's; remove it or fix its mode")))
    except FileNotFoundError:
        out.append(("ok", "socket directory",
                    f"{directory} does not exist yet (zephond creates it 0700)"))
    from .pipeline import daemon_status
    from .errors import ZephonError
    try:
        status = daemon_status(socket, timeout_s=3.0)
    except ZephonError as e:
        if not start:
            return out + [("warn", "daemon", f"none answers at {socket} ({e}); the first "
                                             "attach starts one (or run with --start)")]
        started = _start_daemon(socket)
        if isinstance(started, str):
            return out + [("FAIL", "daemon", started)]
        status = started
    instances = status.get("instances", [])
    out.append(("ok", "daemon", f"pid {status.get('pid')} at {status.get('socket', socket)}, "
                                f"{len(instances)} instance(s), shm prefix "
                                f"{status.get('shm_prefix')}"))
    out.append(_ring_abi_check(status))
    return out


def _ring_abi_check(status: dict[str, Any]) -> Check:
    """The client reads rings of its own layout major version only (shm/ring_layout.h); a
    daemon of another major refuses every attach, so say so before the first one does."""
    from . import _native
    ours = int(_native.LIB.zephon_ring_abi_major())
    major, minor = int(status.get("ring_abi_major", 0)), int(status.get("ring_abi_minor", 0))
    if major == 0:
        return ("warn", "ring ABI", f"the daemon does not report its ring layout (older than "
                                    f"this client, which reads major {ours}); restart it "
                                    "from this build if attaches are refused")
    if major != ours:
        return ("FAIL", "ring ABI", f"the daemon writes ring layout {major}.{minor}, this "
                                    f"client reads major {ours}: every attach is refused; "
                                    f"stop that daemon (kill {status.get('pid')}: it exits "
                                    "cleanly on SIGTERM) so this package's starts, or install "
                                    "the client that matches it")
    return ("ok", "ring ABI", f"daemon writes {major}.{minor}, client reads major {ours}")


def _start_daemon(socket: str) -> dict[str, Any] | str:
    """Starts zephond on `socket` as a rank's first attach does (client/connection.cc):
    no TCP port, exiting after $ZEPHON_IDLE_EXIT_S (default 30) idle seconds, logging to
    `<socket>.log`. Returns the status, or the error's text."""
    import subprocess
    from . import _native
    from .errors import ZephonError
    from .pipeline import daemon_status
    daemon = _native.zephond_path()
    if daemon is None:
        return "cannot start one: zephond was not found (run `make build`)"
    os.makedirs(os.path.dirname(socket), mode=0o700, exist_ok=True)
    idle = os.environ.get("ZEPHON_IDLE_EXIT_S") or "30"
    with open(socket + ".log", "ab") as log:
        os.chmod(socket + ".log", 0o600)
        subprocess.Popen([daemon, "--socket", socket, "--idle-exit-s", idle,
                          "--metrics-address", ""], stdin=subprocess.DEVNULL, stdout=log,
                         stderr=log, start_new_session=True)
    try:
        return daemon_status(socket, timeout_s=10.0)
    except ZephonError as e:
        return f"started {daemon} --socket {socket}, but it does not answer: {e}"


def _shm_check(path: str = "/dev/shm") -> Check:
    try:
        st = os.statvfs(path)
    except OSError as e:
        return ("FAIL", "shared memory", f"{path}: {e}")
    total, free = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
    detail = f"{path}: {free / 2**30:.1f} GiB free of {total / 2**30:.1f} GiB"
    if total < _SHM_WARN_BYTES:
        return ("warn", "shared memory",
                detail + ": small for rings of long rows (a container default?); give the "
                         "container more (docker --shm-size, or a Memory emptyDir on /dev/shm)")
    return ("ok", "shared memory", detail)


def doctor(socket: Optional[str], start: bool, write: Callable[[str], None] = print) -> int:
    socket = socket or default_socket()
    checks = [("ok", "zephon", f"{__version__} at {Path(__file__).resolve().parent}")]
    checks += _native_checks()
    checks.append(_shm_check())
    checks += _socket_checks(socket, start)
    width = max(len(what) for _, what, _ in checks)
    for status, what, detail in checks:
        write(f"{status:4} {what:<{width}}  {detail}")
    return 1 if any(status == "FAIL" for status, _, _ in checks) else 0


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zephon",
                                     description="Zephon's Python package: version and checks")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command")
    doc = sub.add_parser("doctor", help="check the native parts, the daemon and /dev/shm")
    doc.add_argument("--socket", help="the daemon socket (default: as a rank finds it)")
    doc.add_argument("--start", action="store_true",
                     help="start a daemon on the socket when none answers")
    args = parser.parse_args(argv)
    if args.version:
        from . import _native
        print(f"zephon {__version__} (C API {_native.C_API_VERSION})")
        return 0
    if args.command == "doctor":
        return doctor(args.socket, args.start)
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
