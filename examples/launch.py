"""Spawns N local trainer processes with torchrun-style environment variables (RANK,
LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT) and waits.
If one fails, the others are stopped and its exit status is returned.

    python3 examples/launch.py --nproc 4 [--socket PATH] examples/torchtitan_style.py -- ARGS

--socket sets ZEPHON_SOCKET for the children (default: inherited).
"""
from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nproc", type=int, required=True)
    p.add_argument("--master-port", type=int, default=0, help="0: pick a free port")
    p.add_argument("--socket", help="zephond socket, passed as ZEPHON_SOCKET")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds for the whole job")
    p.add_argument("script")
    p.add_argument("script_args", nargs=argparse.REMAINDER)
    args = p.parse_args()
    script_args = args.script_args[1:] if args.script_args[:1] == ["--"] else args.script_args

    env = dict(os.environ, MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(args.master_port or free_port()),
               WORLD_SIZE=str(args.nproc), LOCAL_WORLD_SIZE=str(args.nproc))
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    env.setdefault("OMP_NUM_THREADS", "1")
    if args.socket:
        env["ZEPHON_SOCKET"] = args.socket
    procs = []
    for rank in range(args.nproc):
        procs.append(subprocess.Popen([sys.executable, args.script] + script_args,
                                      env=dict(env, RANK=str(rank), LOCAL_RANK=str(rank))))
    deadline = time.monotonic() + args.timeout
    status = 0
    while any(proc.poll() is None for proc in procs):
        failed = [proc.returncode for proc in procs if proc.returncode not in (None, 0)]
        if failed or time.monotonic() > deadline:
            status = failed[0] if failed else 124
            if not failed:
                print(f"launch: timed out after {args.timeout:.0f} s", file=sys.stderr)
            for proc in procs:  # stop the others: they would wait in collectives
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            for proc in procs:
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            break
        time.sleep(0.05)
    if status == 0:
        status = next((proc.returncode for proc in procs if proc.returncode), 0)
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    sys.exit(main())
