"""A trainer rank in its own process, driven over stdin, for crash tests.

    python rank_proc.py '<json: corpus, socket, options>'
stdin commands, one per line: "read N" (prints one hash per batch, then "ok"), "attack"
(a hostile reader: tries to shrink, grow or map writable every ring memfd this process
holds; prints "attack <json of what happened>", then "ok"), "close" (detaches and exits
0). Errors print "error <ExceptionClass> <message>" and exit 3.
"""
from __future__ import annotations

import hashlib
import json
import mmap
import os
import sys

import zephon


def attack() -> dict:
    """Everything a careless or hostile reader could try with the ring it was given."""
    report = {"memfds": [], "succeeded": []}
    for fd_name in os.listdir("/proc/self/fd"):
        fd = int(fd_name)
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if not target.startswith("/memfd:"):
            continue
        report["memfds"].append(target)
        size = os.fstat(fd).st_size
        attempts = {
            "ftruncate 4096": lambda: os.ftruncate(fd, 4096),
            "ftruncate 0": lambda: os.ftruncate(fd, 0),
            "ftruncate grow": lambda: os.ftruncate(fd, size * 2),
        }
        if not target.split(" ")[0].endswith(".cursors"):
            attempts["mmap writable"] = lambda: mmap.mmap(fd, 4096, mmap.MAP_SHARED,
                                                           mmap.PROT_READ | mmap.PROT_WRITE)
            attempts["reopen O_RDWR and write"] = lambda: os.write(
                os.open(f"/proc/self/fd/{fd}", os.O_RDWR), b"x")
        for what, run in attempts.items():
            try:
                run()
                report["succeeded"].append(f"{target}: {what}")
            except OSError:
                pass
    return report


def main() -> int:
    cfg = json.loads(sys.argv[1])
    ds = zephon.Dataset.from_path("web", cfg["corpus"], fmt="megatron")
    ws = zephon.StaticMixtureWorkSource([ds], seed=1234, chunk_size=32)
    pipe = (zephon.Pipeline(ws).pack_flat(max_length=129).batch(2)
            .options(daemon=cfg["socket"], **cfg["options"]))
    try:
        it = iter(pipe)
        print("attached", flush=True)
        for line in sys.stdin:
            cmd = line.split()
            if not cmd:
                continue
            if cmd[0] == "read":
                for _ in range(int(cmd[1])):
                    b = next(it)
                    print(hashlib.sha256(b["tokens"].tobytes()).hexdigest()[:16], flush=True)
                print("ok", flush=True)
            elif cmd[0] == "attack":
                print("attack " + json.dumps(attack()), flush=True)
                print("ok", flush=True)
            elif cmd[0] == "close":
                pipe.close()
                return 0
    except Exception as e:  # reported to the test, which asserts on it
        print(f"error {type(e).__name__} {e}", flush=True)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
