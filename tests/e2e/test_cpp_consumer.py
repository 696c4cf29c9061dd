"""The C++ example consumer reads batches, checkpoints, and resumes exactly."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CONSUMER = REPO / "bazel-bin" / "examples" / "cpp" / "consumer"


@pytest.mark.skipif(not CONSUMER.exists(), reason="run `make build` first")
def test_cpp_consumer_checkpoints_and_resumes(daemon, corpus, tmp_path):
    def run(*args):
        out = subprocess.run([str(CONSUMER), "--socket", daemon.socket, "--dataset",
                              str(corpus), *args], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout.split("\n")[:-1]

    straight = run("--batches", "10")
    state = tmp_path / "state.zckpt"
    first = run("--batches", "4", "--checkpoint", str(state))
    assert state.read_bytes()[:8] == b"ZEPHCKPT"
    resumed = run("--batches", "6", "--restore", str(state))
    assert first + resumed == straight
    assert [line.split()[0] for line in straight[:4]] == ["0", "1", "0", "1"]
