"""Fixtures for end-to-end tests: a Megatron corpus written with project code, and
zephond processes with their own sockets and shm prefixes (one per simulated node)."""
from __future__ import annotations

import gc
import os
from pathlib import Path

import numpy as np
import pytest

import zephon
from zephon.corpus import synthetic_documents
from zephond_process import Daemon, private_dir  # noqa: F401  (tests import them from here)


NUM_DOCS = 2000


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    docs = synthetic_documents(NUM_DOCS, seed=11)
    zephon.write_megatron_dataset(root / "shard-0", docs[: NUM_DOCS // 2], dtype=np.uint16)
    zephon.write_megatron_dataset(root / "shard-1", docs[NUM_DOCS // 2:], dtype=np.uint16)
    return root


def assert_rings_freed_and_stop(d: Daemon) -> None:
    """Checks that the daemon freed every ring once the test's pipelines closed (it frees
    a ring asynchronously after its last reader detached: a short wait, with a deadline),
    then stops it cleanly and checks that no /dev/shm segment of its prefix exists.

    The ring check must come first: rings are memfds, which vanish with the process, so
    after stop() nothing is left to see."""
    gc.collect()  # Pipelines the test dropped without close() (cycles) detach now
    try:
        held = d.wait_no_ring_memfds(deadline_s=5)
        assert held == [], (f"zephond still holds ring memfds {held} after every pipeline "
                            "closed (a ring leaked)")
    finally:
        rc = d.stop()
    assert rc == 0, f"zephond exited with {rc}; log:\n{d.log.read_text()}"
    assert d.legacy_shm_segments() == [], "zephond left /dev/shm segments behind"


@pytest.fixture
def daemon(tmp_path):
    d = Daemon(tmp_path)
    yield d
    assert_rings_freed_and_stop(d)


@pytest.fixture
def make_daemon(tmp_path):
    """Several daemons on one machine, each with its own directory and shm prefix."""
    started = []

    def make(name: str) -> Daemon:
        d = Daemon(private_dir(tmp_path / name))
        started.append(d)
        return d

    yield make
    failures = []
    for d in started:  # every daemon is stopped, even after one fails its check
        try:
            assert_rings_freed_and_stop(d)
        except AssertionError as e:
            failures.append(f"{d.workdir.name}: {e}")
    assert not failures, "\n".join(failures)


def pipeline(corpus: Path, socket: str, *, seed: int = 1234, chunk_size: int = 32,
             max_length: int = 129, microbatch: int = 2, **options) -> zephon.Pipeline:
    ds = zephon.Dataset.from_path("web", str(corpus), fmt="megatron")
    ws = zephon.StaticMixtureWorkSource([ds], seed=seed, chunk_size=chunk_size)
    return (zephon.Pipeline(ws).pack_flat(max_length=max_length).batch(microbatch)
            .options(daemon=socket, **options))
