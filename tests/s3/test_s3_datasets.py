"""Datasets under s3:// (issue 8): zephond reads them through its node-wide shard cache.

Runs s3rver on loopback (the `server` fixture sets AWS_ENDPOINT_URL and the keys; every
zephond started here inherits them), uploads a Megatron corpus with s3_tool and reads it
with the Python client, next to the same files on local disk. Skips when s3rver, node or
s3_tool is missing. No timed assertions: failure cases only have to end (each wait in
the client and the daemon has its own deadline).
"""
from __future__ import annotations

import hashlib
import re
import subprocess
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

import zephon
from zephon.corpus import synthetic_documents
from fault_proxy import DELAY, PASS, FaultProxy
from s3rver import BUCKET, REQUIRES_S3RVER, tool
from zephond_process import Daemon, zephonctl_path

pytestmark = REQUIRES_S3RVER

PREFIX = "corpora/web"
URL = f"s3://{BUCKET}/{PREFIX}"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """Two Megatron shards (~1.3 MB of uint16 tokens) on local disk."""
    root = tmp_path_factory.mktemp("s3corpus")
    docs = synthetic_documents(3000, seed=7, min_len=50, max_len=400)
    zephon.write_megatron_dataset(root / "shard-0", docs[:1700], dtype=np.uint16)
    zephon.write_megatron_dataset(root / "shard-1", docs[1700:], dtype=np.uint16)
    return root


def upload(corpus: Path, prefix: str = PREFIX) -> None:
    for f in sorted(corpus.iterdir()):
        r = tool("put", str(f), f"s3://{BUCKET}/{prefix}/{f.name}")
        assert r.returncode == 0, r.stderr.decode()


def node(tmp_path: Path, name: str, *args: str) -> Daemon:
    """A zephond with its own socket, shm prefix and cache directory."""
    return Daemon(tmp_path / name, ["--cache-dir", str(tmp_path / name / "cache"), *args])


def make_pipe(path: str, d: Daemon, restore: bytes | None = None, **options) -> zephon.Pipeline:
    ds = zephon.Dataset.from_path("web", path, fmt="megatron")
    ws = zephon.StaticMixtureWorkSource([ds], seed=99, chunk_size=64)
    p = (zephon.Pipeline(ws).pack_flat(max_length=257).batch(4)
         .options(daemon=d.socket, canonical_replicas=2, **options))
    return p.restore(restore) if restore is not None else p


def digest(batch) -> tuple:
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(batch["tokens"]).tobytes())
    h.update(np.ascontiguousarray(batch["positions"]).tobytes())
    return (h.hexdigest(), batch.lane, batch.lane_batch_index, tuple(batch.ids))


def read_all(p: zephon.Pipeline, limit: int | None = None) -> list[tuple]:
    out = []
    for b in p:
        out.append(digest(b))
        if limit is not None and len(out) == limit:
            break
    return out


def cache_status(d: Daemon) -> dict:
    return d.status()["shard_cache"]


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.glob("*.blk"))


def test_s3_batches_equal_local_batches_and_checkpoints_cross_over(server, corpus, tmp_path):
    upload(corpus)
    d = node(tmp_path, "node")
    try:
        local = make_pipe(str(corpus), d)
        expected = read_all(local)
        local_hash = local.attach_info["spec_hash"]
        local.close()
        remote = make_pipe(URL, d)
        assert read_all(remote) == expected
        assert remote.attach_info["spec_hash"] == local_hash  # where the files live is no data
        remote.close()
        assert len(expected) > 100

        # A checkpoint taken on S3 resumes on local disk, and the other way round.
        for first, second in ((URL, str(corpus)), (str(corpus), URL)):
            p = make_pipe(first, d)
            head = read_all(p, limit=37)
            state = p.checkpoint()
            p.close()
            q = make_pipe(second, d, restore=state)
            assert head + read_all(q) == expected
            q.close()
        status = cache_status(d)
        assert int(status["bytes_downloaded"]) > 0 and status["on_disk"]
    finally:
        assert d.stop() == 0


def test_a_second_instance_and_a_restarted_daemon_hit_the_cache(server, corpus, tmp_path):
    upload(corpus)
    d = node(tmp_path, "node", "--shard-cache-block-bytes=65536")
    try:
        first = make_pipe(URL, d)
        expected = read_all(first)
        first.close()
        status = cache_status(d)
        downloaded = int(status["bytes_downloaded"])
        total = sum(f.stat().st_size for f in corpus.iterdir())
        # Every byte at most once (a batch cut short at the end leaves a tail unread).
        assert 0.9 * total < downloaded <= total
        # Another instance (another run) reads the same blocks from the cache.
        second = make_pipe(URL, d, run_id="second", world_size=1, global_rank=0)
        assert read_all(second) == expected
        second.close()
        after = cache_status(d)
        assert int(after["bytes_downloaded"]) == downloaded
        assert int(after["hits"]) > int(status["hits"])
        ctl = subprocess.run([zephonctl_path(), "status", "--socket", d.socket],
                             capture_output=True, text=True, timeout=60)
        assert ctl.returncode == 0, ctl.stderr
        assert "shard cache " + str(tmp_path / "node" / "cache" / "objects") in ctl.stdout
        metrics_address = d.status()["metrics_address"]
        with urllib.request.urlopen(f"http://{metrics_address}/metrics", timeout=30) as r:
            metrics = r.read().decode()
        assert f"zephon_shard_cache_downloaded_bytes_total {downloaded}\n" in metrics
        # Every S3 call counted by operation (ranged GETs of the blocks), none failed.
        gets = re.search(r'^zephon_s3_requests_total\{op="GET"\} (\d+)$', metrics, re.M)
        assert gets and int(gets.group(1)) >= downloaded // 65536, metrics
        assert re.search(r'^zephon_s3_errors_total\{op="GET"\} 0$', metrics, re.M), metrics
    finally:
        assert d.stop() == 0
    # A restarted daemon adopts the cache directory: a third pass downloads nothing.
    d.start()
    try:
        third = make_pipe(URL, d)
        assert read_all(third) == expected
        third.close()
        status = cache_status(d)
        assert int(status["bytes_downloaded"]) == 0
        assert int(status["adopted"]) > 0
    finally:
        assert d.stop() == 0


def test_a_tiny_cache_stays_under_its_limit(server, corpus, tmp_path):
    upload(corpus)
    limit, block = 200_000, 16_384
    d = node(tmp_path, "node", f"--shard-cache-bytes={limit}",
             f"--shard-cache-block-bytes={block}")
    objects = tmp_path / "node" / "cache" / "objects"
    try:
        local = make_pipe(str(corpus), d)
        expected = read_all(local)
        local.close()
        remote = make_pipe(URL, d)
        got = []
        snapshots = 0
        for b in remote:
            got.append(digest(b))
            if len(got) % 25 == 0:
                # While reading: one Status reply is one snapshot of the cache (taken
                # under its lock), so compare within it. Only pinned entries (being read
                # or downloaded) may hold the cache past its limit.
                status = cache_status(d)
                assert status["on_disk"] and int(status["limit_bytes"]) == limit, status
                assert (int(status["resident_bytes"])
                        <= limit + int(status.get("pinned_bytes", 0))), status
                snapshots += 1
        remote.close()
        assert got == expected
        assert snapshots > 0
        # After the reads: nothing pinned, and the cache and its directory are within
        # the limit although the dataset is larger (so entries were evicted).
        status = cache_status(d)
        assert int(status.get("pinned_bytes", 0)) == 0
        assert int(status["resident_bytes"]) <= limit
        assert dir_bytes(objects) <= limit
        assert int(status["evictions"]) > 0
    finally:
        assert d.stop() == 0


def test_jsonl_and_flat_from_s3_equal_local(server, tmp_path):
    root = tmp_path / "data"
    (root / "jsonl").mkdir(parents=True)
    (root / "flat").mkdir()
    lines = [f'{{"input_ids": {list(range(i % 50 + 1))}}}' for i in range(400)]
    (root / "jsonl" / "part-0.jsonl").write_text("\n".join(lines) + "\n")
    np.arange(20000, dtype=np.uint16).tofile(root / "flat" / "tokens.bin")
    for sub in ("jsonl", "flat"):
        upload(root / sub, f"mixed/{sub}")
    d = node(tmp_path, "node")
    try:
        for sub, fmt, extra in (("jsonl", "jsonl", {}), ("flat", "flat", {"sample_tokens": 100})):
            batches = []
            for path in (str(root / sub), f"s3://{BUCKET}/mixed/{sub}"):
                ds = zephon.Dataset.from_path("d", path, fmt=fmt, **extra)
                p = (zephon.Pipeline(zephon.StaticMixtureWorkSource([ds], chunk_size=16))
                     .pack_flat(max_length=33).batch(2).options(daemon=d.socket))
                batches.append(read_all(p))
                p.close()
            assert batches[0] == batches[1] and batches[0], sub
    finally:
        assert d.stop() == 0


def attach_error(path: str, d: Daemon) -> str:
    p = make_pipe(path, d)
    with pytest.raises(zephon.ZephonError) as err:
        read_all(p, limit=1)
    p.close()
    return str(err.value)


def test_missing_bucket_key_and_bad_credentials_name_the_object(server, corpus, tmp_path,
                                                                 monkeypatch):
    upload(corpus)
    d = node(tmp_path, "node", "--s3-timeout-ms=5000", "--s3-attempts=2")
    try:
        msg = attach_error("s3://no-such-bucket-zephon/web", d)
        assert "no-such-bucket-zephon" in msg and "does not exist" in msg, msg
        msg = attach_error(f"s3://{BUCKET}/corpora/missing/shard-0", d)
        assert f"s3://{BUCKET}/corpora/missing/shard-0.idx" in msg and "HTTP 404" in msg, msg
    finally:
        assert d.stop() == 0
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "NOT-A-KEY")
    bad = node(tmp_path, "bad", "--s3-timeout-ms=5000", "--s3-attempts=2")
    try:
        msg = attach_error(URL, bad)
        assert BUCKET in msg and "HTTP 403" in msg, msg
    finally:
        assert bad.stop() == 0


def test_the_store_dying_mid_run_fails_the_pipeline_with_a_clear_error(server, corpus, tmp_path):
    upload(corpus)
    # A small cache and small blocks: the rest of the pass needs the server.
    d = node(tmp_path, "node", "--shard-cache-bytes=65536", "--shard-cache-block-bytes=16384",
             "--s3-timeout-ms=2000", "--s3-attempts=2")
    try:
        p = make_pipe(URL, d, prefetch_batches=2)
        it = iter(p)
        for _ in range(5):
            next(it)
        server.stop()
        with pytest.raises(zephon.ZephonError) as err:
            for _ in it:
                pass
        msg = str(err.value)
        assert f"s3://{BUCKET}/{PREFIX}/shard-" in msg, msg
        assert "lane" in msg and "batch" in msg, msg
        p.close()
        # The failed calls are what ZephonS3Errors pages on: retried, then counted.
        s3 = {r["op"]: r for r in d.status()["s3_requests"]}
        assert int(s3["GET"].get("errors", 0)) >= 1, s3
        assert int(s3["GET"].get("retries", 0)) >= 1, s3
    finally:
        assert d.stop() == 0


@contextmanager
def node_behind_proxy(server, tmp_path, monkeypatch):
    """A zephond whose S3 requests go through a FaultProxy in front of `server`."""
    with FaultProxy(server.port) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        d = node(tmp_path, "node")
        try:
            yield d, proxy
        finally:
            proxy.set_fault(PASS)
            assert d.stop() == 0


def test_a_rank_joining_its_dp_group_opens_no_s3_dataset(server, corpus, tmp_path,
                                                          monkeypatch):
    # Two ranks of one DP group on one node share one instance; only the first opens the
    # dataset (List/HEAD/.idx). Counted at a proxy in front of the store.
    upload(corpus)
    with node_behind_proxy(server, tmp_path, monkeypatch) as (d, proxy):
        opts = dict(world_size=2, dp_degree=1, run_id="join", local_peers=2,
                    aggregate_dir=str(tmp_path / "agg"))
        first = make_pipe(URL, d, global_rank=0, dp_group_id=0, **opts)
        second = make_pipe(URL, d, global_rank=1, dp_group_id=0, **opts)

        def opening_requests():
            # Listings, HEADs and .idx reads open a dataset; .bin block reads are the
            # running instance's producer reading ahead, which may go on meanwhile.
            return [h for h in proxy.request_heads()
                    if b"list-type=2" in h or h.startswith(b"HEAD ")
                    or b".idx " in h.split(b"\r\n", 1)[0]]

        first.attach()
        before = len(opening_requests())
        assert before > 0, "the first rank opened the dataset through the store"
        second.attach()
        assert len(opening_requests()) == before, "the joining rank opened nothing"
        assert first.attach_info["spec_hash"] == second.attach_info["spec_hash"]
        assert first.attach_info["instance_id"] == second.attach_info["instance_id"]
        a, b = iter(first), iter(second)
        for _ in range(3):
            assert digest(next(a)) == digest(next(b))
        first.close()
        second.close()


def test_ranks_attaching_together_open_the_s3_dataset_once(server, corpus, tmp_path,
                                                           monkeypatch):
    # Four ranks of one DP group attach at the same moment against a slow store: one of
    # them opens the dataset, the others wait for its datasets instead of listing too.
    upload(corpus)
    with node_behind_proxy(server, tmp_path, monkeypatch) as (d, proxy):
        proxy.set_fault(DELAY, after_bytes=300)  # every request takes >= 0.3 s
        opts = dict(world_size=4, dp_degree=1, run_id="together", local_peers=4,
                    aggregate_dir=str(tmp_path / "agg"))
        pipes = [make_pipe(URL, d, global_rank=r, dp_group_id=0, **opts) for r in range(4)]
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda p: p.attach(), pipes))
        listings = [h for h in proxy.request_heads() if b"list-type=2" in h]
        assert len(listings) == 1, [h.split(b"\r\n", 1)[0] for h in listings]
        assert len({p.attach_info["instance_id"] for p in pipes}) == 1
        for p in pipes:
            p.close()


def test_a_tokenizer_from_s3_tokenizes_like_the_local_file(server, tmp_path):
    """Pipeline.tokenize(tokenizer="s3://...") : zephond reads the tokenizer.json (a file
    URL, or a "directory" holding one) with its S3 settings; the batches and the spec hash
    equal those of the same file on local disk, and a missing object is named."""
    from test_tokenize_pipeline import text_pipeline, tiny_tokenizer_json, write_text_dataset
    local = tmp_path / "tok" / "tokenizer.json"
    local.parent.mkdir()
    local.write_text(tiny_tokenizer_json(), encoding="utf-8")
    upload(local.parent, "tokenizers/tiny")
    data = write_text_dataset(tmp_path / "text", [("a b " * (i % 9 + 1)).strip()
                                                  for i in range(300)])
    d = node(tmp_path, "node")
    try:
        runs = []
        for tok in (str(local), f"s3://{BUCKET}/tokenizers/tiny/tokenizer.json",
                    f"s3://{BUCKET}/tokenizers/tiny"):
            p = text_pipeline(data, tok, daemon=d.socket)
            runs.append((read_all(p), p.attach_info["spec_hash"]))
            p.close()
        assert runs[0][0] and runs[0] == runs[1] == runs[2]
        p = text_pipeline(data, f"s3://{BUCKET}/tokenizers/none/tokenizer.json", daemon=d.socket)
        with pytest.raises(zephon.ZephonError) as err:
            read_all(p, limit=1)
        p.close()
        assert "tokenizers/none/tokenizer.json" in str(err.value), err.value
    finally:
        assert d.stop() == 0


def test_parquet_and_mds_from_s3_equal_local(server, tmp_path):
    """A DuckDB-written Parquet file (ranged reads of its footer and column chunks) and a
    zstd MDS dataset (index.json + shard) read from s3:// give the local batches."""
    testdata = Path(__file__).resolve().parents[2] / "daemon" / "pipeline" / "formats"
    cases = (("parquet", testdata / "parquet" / "testdata", "tokens.parquet", "ids"),
             ("mds", testdata / "mds" / "testdata" / "zstd", None, "ids"))
    d = node(tmp_path, "node")
    try:
        for fmt, src, only, field in cases:
            local = tmp_path / "data" / fmt
            local.mkdir(parents=True)
            for f in sorted(src.iterdir()):
                if only is None or f.name == only:
                    (local / f.name).write_bytes(f.read_bytes())
            upload(local, f"records/{fmt}")
            batches = []
            for path in (str(local), f"s3://{BUCKET}/records/{fmt}"):
                ds = zephon.Dataset.from_path("d", path, fmt=fmt, field=field)
                p = (zephon.Pipeline(zephon.StaticMixtureWorkSource([ds], chunk_size=1))
                     .pack_flat(max_length=3).batch(1).options(daemon=d.socket))
                batches.append(read_all(p))
                p.close()
            assert batches[0] == batches[1] and batches[0], fmt
    finally:
        assert d.stop() == 0
