"""Dataset files other processes damage while zephond reads them: a Megatron .bin or flat
token file truncated in place mid-run, and JSONL lines past --max-jsonl-line-bytes. Each is
an error on the instance that reads the file, naming the file, never a dead daemon."""
from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import pytest

import zephon
from conftest import Daemon
from zephon.corpus import synthetic_documents


def megatron_corpus(folder: Path, docs: int, seed: int) -> Path:
    folder.mkdir()
    zephon.write_megatron_dataset(folder / "shard-0",
                                  synthetic_documents(docs, seed=seed, min_len=200, max_len=400),
                                  dtype=np.uint16)
    return folder


def reader(corpus: Path, socket: str, fmt: str, run_id: str) -> zephon.Pipeline:
    ds = zephon.Dataset.from_path("d", str(corpus), fmt=fmt)
    ws = zephon.StaticMixtureWorkSource([ds], seed=5, chunk_size=16)
    return (zephon.Pipeline(ws).pack_flat(max_length=129).batch(2)
            .options(daemon=socket, run_id=run_id))


def read_until_error(pipe: zephon.Pipeline, limit: int) -> zephon.ZephonError:
    """Reads until the pipeline fails; the ring holds only a few batches ahead, far
    fewer than `limit`, so the daemon must reach the damaged bytes first."""
    it = iter(pipe)
    with pytest.raises(zephon.ZephonError) as err:
        for _ in range(limit):
            next(it)
    return err.value


@pytest.mark.parametrize("fmt", ["megatron", "flat"])
def test_dataset_truncated_mid_run_fails_that_instance_not_the_daemon(daemon, tmp_path, fmt):
    victim_dir = megatron_corpus(tmp_path / "victim", 3000, seed=1)
    if fmt == "flat":  # the same tokens as one flat uint16 file, no .idx beside it
        flat = tmp_path / "flat"
        flat.mkdir()
        os.rename(victim_dir / "shard-0.bin", flat / "tokens.bin")
        victim_dir = flat
    victim_file = victim_dir / ("tokens.bin" if fmt == "flat" else "shard-0.bin")
    bystander_dir = megatron_corpus(tmp_path / "bystander", 300, seed=2)

    victim = reader(victim_dir, daemon.socket, fmt, "victim")
    bystander = reader(bystander_dir, daemon.socket, "megatron", "bystander")
    it = iter(victim)
    next(it)
    before = [next(iter(bystander))["tokens"].tobytes()]

    # What a data-sync job rewriting the file in place does.
    os.truncate(victim_file, 4096)
    err = read_until_error(victim, 5000)
    print(f"reader error: {err}")
    assert str(victim_file) in str(err), err
    assert "truncated" in str(err), err

    # The daemon lives: status answers and the other instance keeps serving.
    assert daemon.proc.poll() is None, daemon.log.read_text()
    status = daemon.status()
    assert any(i.get("run_id") == "bystander" for i in status.get("instances", [])), status
    more = [b["tokens"].tobytes() for _, b in zip(range(20), iter(bystander))]
    assert len(more) == 20 and before
    assert str(victim_file) in daemon.log.read_text()  # operators see it too
    victim.close()
    bystander.close()


def jsonl_gz_with_long_line(path: Path, long_tokens: int) -> None:
    """Line 2 of `path` holds `long_tokens` token ids: a few KB compressed."""
    with gzip.open(path, "wt", compresslevel=1) as f:
        f.write('{"input_ids": [1, 2, 3]}\n')
        f.write('{"input_ids": [' + "12345, " * long_tokens + '1]}\n')
        f.write('{"input_ids": [4, 5, 6]}\n')


def jsonl_reader(path: Path, socket: str) -> zephon.Pipeline:
    ds = zephon.Dataset.from_path("j", str(path), fmt="jsonl")
    return (zephon.Pipeline(zephon.StaticMixtureWorkSource([ds])).pack_flat(max_length=3)
            .batch(1).options(daemon=socket))


def test_jsonl_line_over_max_jsonl_line_bytes_fails_naming_file_and_line(tmp_path):
    d = Daemon(tmp_path / "d", ["--max-jsonl-line-bytes", "4096",
                                "--cache-dir", str(tmp_path / "cache")])
    try:
        path = tmp_path / "long.jsonl.gz"
        jsonl_gz_with_long_line(path, 1000)  # a 7 KB line
        with pytest.raises(zephon.ZephonError) as err:
            jsonl_reader(path, d.socket).attach()
        print(f"reader error: {err.value}")
        assert f"{path}: line 2 " in str(err.value)
        assert "--max-jsonl-line-bytes" in str(err.value)
        assert d.proc.poll() is None and d.status() is not None
    finally:
        assert d.stop() == 0


def test_jsonl_default_line_bound_refuses_a_line_past_64_mib(daemon, tmp_path):
    path = tmp_path / "huge.jsonl.gz"
    jsonl_gz_with_long_line(path, (64 << 20) // 7 + 1)  # 64 MiB of JSON: ~300 KB gzipped
    assert path.stat().st_size < (1 << 20)
    with pytest.raises(zephon.ZephonError, match=r"huge\.jsonl\.gz: line 2 .*67108864 bytes"):
        jsonl_reader(path, daemon.socket).attach()
    assert daemon.proc.poll() is None
