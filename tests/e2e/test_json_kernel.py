"""simdjson's kernel in zephond (daemon/pipeline/formats/json_kernel.h): ZEPHON_SIMDJSON_KERNEL
picks it and the daemon logs it at start, a name that is no kernel stops the daemon, and the
portable kernel turns JSONL into the same batches as the best kernel of the CPU."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import uuid

import numpy as np

import zephon
from zephon import _native
from conftest import Daemon, assert_rings_freed_and_stop, private_dir


def test_a_name_that_is_no_kernel_stops_zephond_naming_the_choices(tmp_path):
    run = private_dir(tmp_path / "run")
    out = subprocess.run([_native.zephond_path(), "--socket", str(run / "z.sock"),
                          "--shm-prefix", f"zt{uuid.uuid4().hex[:10]}"],
                         env=dict(os.environ, ZEPHON_SIMDJSON_KERNEL="avx9"),
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 4, out.stderr
    assert "ZEPHON_SIMDJSON_KERNEL=avx9: " in out.stderr, out.stderr
    assert "use one of " in out.stderr and "fallback, or unset it" in out.stderr, out.stderr


def write_jsonl(path, docs):
    # Text around the tokens, with escapes and multi-byte UTF-8: the kernels index it all.
    path.write_text("".join(
        json.dumps({"text": f"doc {i} caf\u00e9 \u65e5\u672c \"q\" \\ \U0001F600 " * 20,
                    "input_ids": [int(t) for t in d]}, ensure_ascii=i % 2 == 0) + "\n"
        for i, d in enumerate(docs)), encoding="utf-8")


def test_the_fallback_kernel_gives_the_same_batches(tmp_path, monkeypatch):
    docs = [np.arange(1, 30 + i % 17) + i for i in range(300)]
    data = tmp_path / "data"
    data.mkdir()
    write_jsonl(data / "d.jsonl", docs)
    results = []
    for kernel in ("", "fallback"):  # "" is simdjson's choice
        name = kernel or "best"
        monkeypatch.setenv("ZEPHON_SIMDJSON_KERNEL", kernel)
        # Its own token cache: each daemon converts the shard itself.
        d = Daemon(tmp_path / name, ["--cache-dir", str(tmp_path / f"cache-{name}")], peer=False)
        try:
            log = d.log.read_text()
            assert "JSON is parsed with simdjson's " in log, log
            if kernel:
                assert f"simdjson's {kernel} kernel" in log, log
            ds = zephon.Dataset.from_path("j", str(data), fmt="jsonl")
            pipe = (zephon.Pipeline(zephon.StaticMixtureWorkSource([ds], seed=3, chunk_size=50))
                    .pack_flat(max_length=33).batch(2).options(daemon=d.socket))
            it = iter(pipe)
            batches = []
            for _ in range(20):
                b = next(it)
                batches.append((hashlib.sha256(b["tokens"].tobytes()).hexdigest(), tuple(b.ids)))
            results.append(batches)
            pipe.close()
        finally:
            assert_rings_freed_and_stop(d)
    assert results[0] == results[1]
