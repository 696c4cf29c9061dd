"""The node's token cache (converted JSONL shards under --cache-dir) under a tiny
--token-cache-bytes: a miss, then a hit on re-attach, an eviction when a second dataset
does not fit, the evicted dataset rebuilt with the same batches, all visible in status,
`zephonctl status` and /metrics, and adopted by a restarted daemon."""
from __future__ import annotations

import hashlib
import subprocess
import time
import urllib.request
from pathlib import Path

import numpy as np

import zephon
from conftest import Daemon, assert_rings_freed_and_stop
from zephond_process import zephonctl_path

LINES = 200
TOKENS_PER_LINE = 20
# One converted shard: int32 tokens (.tok) and LINES + 1 u64 offsets (.off).
ENTRY_BYTES = 4 * LINES * TOKENS_PER_LINE + 8 * (LINES + 1)


def write_jsonl(path: Path, first_token: int) -> None:
    with open(path, "w") as f:
        for i in range(LINES):
            ids = range(first_token + i * TOKENS_PER_LINE,
                        first_token + (i + 1) * TOKENS_PER_LINE)
            f.write('{"input_ids": [' + ", ".join(map(str, ids)) + "]}\n")


def read_all(path: Path, d: Daemon) -> list[str]:
    ds = zephon.Dataset.from_path("j", str(path), fmt="jsonl")
    p = (zephon.Pipeline(zephon.StaticMixtureWorkSource([ds], seed=5, chunk_size=16))
         .pack_flat(max_length=65).batch(2).options(daemon=d.socket))
    out = [hashlib.sha256(np.ascontiguousarray(b["tokens"]).tobytes()).hexdigest()
           for b in p]
    p.close()
    assert out
    return out


def token_cache(d: Daemon) -> dict:
    """The status's token_cache, counters as ints (JSON writes uint64 as strings and
    leaves out zeros)."""
    t = d.status()["token_cache"]
    return {k: (v if k == "dir" or isinstance(v, bool) else int(v)) for k, v in t.items()}


def released(d: Daemon) -> dict:
    """The token cache once no dataset holds an entry (instances end asynchronously)."""
    deadline = time.monotonic() + 10
    while True:
        t = token_cache(d)
        if t.get("pinned_bytes", 0) == 0 or time.monotonic() > deadline:
            return t
        time.sleep(0.05)


def test_token_cache_budget_hits_evicts_rebuilds_and_survives_restart(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_jsonl(a, 0)
    write_jsonl(b, 100000)
    cache = tmp_path / "cache"
    budget = ENTRY_BYTES + ENTRY_BYTES // 2  # one entry fits, two do not
    d = Daemon(tmp_path / "d", ["--cache-dir", str(cache), "--token-cache-bytes", str(budget),
                                "--metrics-address", "127.0.0.1:0"], peer=False)
    try:
        t = token_cache(d)
        assert t["dir"] == str(cache) and t["budget_bytes"] == budget
        assert t.get("entries", 0) == 0

        first = read_all(a, d)
        t = released(d)
        assert (t.get("misses"), t.get("hits", 0), t.get("bytes")) == (1, 0, ENTRY_BYTES), t
        assert read_all(a, d) == first  # re-attach: the converted shard is reused
        t = released(d)
        assert (t.get("misses"), t.get("hits")) == (1, 1), t

        # b does not fit beside a, which no dataset holds any more: a is evicted.
        read_all(b, d)
        t = released(d)
        assert (t.get("misses"), t.get("evictions"), t.get("entries")) == (2, 1, 1), t
        assert t["bytes"] <= budget and not t.get("over_budget", False)
        assert len(list(cache.glob("*.off"))) == 1

        # a again: converted anew, the same batches.
        assert read_all(a, d) == first
        t = released(d)
        assert (t.get("misses"), t.get("evictions"), t.get("evicted_bytes")) == (
            3, 2, 2 * ENTRY_BYTES), t

        ctl = subprocess.run([zephonctl_path(), "status", "--socket", d.socket],
                             capture_output=True, text=True, timeout=60)
        assert ctl.returncode == 0, ctl.stderr
        line = next(x for x in ctl.stdout.splitlines() if x.startswith("token cache "))
        assert str(cache) in line and "hits 1  misses 3" in line and "evictions 2" in line, line
        with urllib.request.urlopen(f"http://{d.status()['metrics_address']}/metrics",
                                    timeout=30) as r:
            metrics = r.read().decode()
        for sample in ("zephon_token_cache_hits_total 1\n",
                       "zephon_token_cache_misses_total 3\n",
                       "zephon_token_cache_evictions_total 2\n",
                       "zephon_token_cache_entries 1\n",
                       f"zephon_token_cache_bytes {ENTRY_BYTES}\n",
                       f"zephon_token_cache_budget_bytes {budget}\n"):
            assert sample in metrics, sample
    finally:
        assert d.stop() == 0

    # A restarted daemon adopts the entry: a hit, nothing converted.
    d.start()
    try:
        t = token_cache(d)
        assert (t.get("adopted"), t.get("entries"), t.get("bytes")) == (1, 1, ENTRY_BYTES), t
        assert read_all(a, d) == first
        t = released(d)
        assert (t.get("hits"), t.get("misses", 0)) == (1, 0), t
    finally:
        assert_rings_freed_and_stop(d)
