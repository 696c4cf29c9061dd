"""Fixtures for end-to-end tests: a Megatron corpus written with project code, and
zephond processes with their own sockets and shm prefixes (one per simulated node)."""
from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

import zephon
from zephon import _native
from zephon.corpus import synthetic_documents

NUM_DOCS = 2000


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    docs = synthetic_documents(NUM_DOCS, seed=11)
    zephon.write_megatron_dataset(root / "shard-0", docs[: NUM_DOCS // 2], dtype=np.uint16)
    zephon.write_megatron_dataset(root / "shard-1", docs[NUM_DOCS // 2:], dtype=np.uint16)
    return root


class Daemon:
    """A zephond on a private socket and shm prefix: one simulated node."""

    def __init__(self, workdir: Path, extra_args: list[str] | None = None):
        self.workdir = workdir
        self.socket = str(workdir / "zephond.sock")
        self.log = workdir / "zephond.log"
        self.shm_prefix = f"zt{uuid.uuid4().hex[:10]}"
        self.extra_args = list(extra_args or [])
        self.start()

    def start(self) -> None:
        """Starts (or, after a crash, restarts) the daemon with the same socket and prefix."""
        binary = _native.zephond_path()
        assert binary, "zephond not built; run `make build`"
        started_before = self._listening_lines()
        self.proc = subprocess.Popen([binary, "--socket", self.socket, "--shm-prefix",
                                      self.shm_prefix, "--log-file", str(self.log)]
                                     + self.extra_args,
                                     stdout=subprocess.DEVNULL,
                                     stderr=open(self.workdir / "zephond.stderr", "a"))
        deadline = time.monotonic() + 15
        while self._listening_lines() == started_before:
            assert self.proc.poll() is None, f"zephond exited: {self.log.read_text()}"
            assert time.monotonic() < deadline, "zephond did not start listening"
            time.sleep(0.02)

    def _listening_lines(self) -> int:
        return self.log.read_text().count("listening on") if self.log.exists() else 0

    def shm_segments(self) -> list[str]:
        return [n for n in os.listdir("/dev/shm") if n.startswith(self.shm_prefix + ".")]

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


@pytest.fixture
def daemon(tmp_path):
    d = Daemon(tmp_path)
    yield d
    rc = d.stop()
    assert rc == 0, f"zephond exited with {rc}; log:\n{d.log.read_text()}"
    assert d.shm_segments() == [], "zephond left shm segments behind"


@pytest.fixture
def make_daemon(tmp_path):
    """Several daemons on one machine, each with its own directory and shm prefix."""
    started = []

    def make(name: str) -> Daemon:
        workdir = tmp_path / name
        workdir.mkdir()
        d = Daemon(workdir)
        started.append(d)
        return d

    yield make
    for d in started:
        assert d.stop() == 0
        assert d.shm_segments() == []


def pipeline(corpus: Path, socket: str, *, seed: int = 1234, chunk_size: int = 32,
             max_length: int = 129, microbatch: int = 2, **options) -> zephon.Pipeline:
    ds = zephon.Dataset.from_path("web", str(corpus), fmt="megatron")
    ws = zephon.StaticMixtureWorkSource([ds], seed=seed, chunk_size=chunk_size)
    return (zephon.Pipeline(ws).pack_flat(max_length=max_length).batch(microbatch)
            .options(daemon=socket, **options))
