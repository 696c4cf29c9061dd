"""A trainer rank in its own process, driven over stdin, for crash tests.

    python rank_proc.py '<json: corpus, socket, options>'
stdin commands, one per line: "read N" (prints one hash per batch, then "ok"), "close"
(detaches and exits 0). Errors print "error <ExceptionClass> <message>" and exit 3.
"""
from __future__ import annotations

import hashlib
import json
import sys

import zephon


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
            elif cmd[0] == "close":
                pipe.close()
                return 0
    except Exception as e:  # reported to the test, which asserts on it
        print(f"error {type(e).__name__} {e}", flush=True)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
