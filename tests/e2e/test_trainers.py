"""The example trainers (examples/) reproduce the guide's promise end to end: a 4-rank
run checkpointed at step 3 (Zephon state saved with the model and optimizer in one file)
resumes on 2 and on 8 ranks with every later global batch identical (SHA-256 of the
step's tokens in canonical lane order) and the same float64 losses."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
STEPS, SAVE_AT = 6, 3

sys.path.insert(0, str(EXAMPLES))
from make_corpus import make_corpus  # noqa: E402


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return Path(make_corpus(str(tmp_path_factory.mktemp("trainer-corpus"))))


def launch(style: str, nproc: int, daemon, data: Path, tmp: Path, *extra: str,
           check: bool = True) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO / "client" / "python"))
    cmd = [sys.executable, str(EXAMPLES / "launch.py"), "--nproc", str(nproc), "--timeout",
           "120", "--socket", daemon.socket, str(EXAMPLES / f"{style}_style.py"), "--",
           "--data", str(data), "--aggregate-dir", str(tmp / "agg"),
           "--canonical-replicas", "8", "--global-batches", "8", "--microbatch", "2",
           "--seq-len", "32", *extra]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    if check:
        assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout}\n{proc.stderr}"
    return proc


def steps(path: Path) -> dict:
    return {s["step"]: s for s in json.loads(path.read_text())["steps"]}


@pytest.mark.parametrize("style,tp", [("torchtitan", "1"), ("torchtitan", "2"),
                                      ("megatron", "2")])
def test_resume_on_2_and_8_ranks_matches_the_uninterrupted_run(style, tp, daemon, data,
                                                               tmp_path):
    launch(style, 4, daemon, data, tmp_path, "--tp", tp, "--run-id", "full",
           "--steps", str(STEPS), "--log", str(tmp_path / "full.json"))
    want = steps(tmp_path / "full.json")
    assert sorted(want) == list(range(1, STEPS + 1))

    ckpt = tmp_path / "ckpt-{step}.pt"
    launch(style, 4, daemon, data, tmp_path, "--tp", tp, "--run-id", "elastic",
           "--steps", str(SAVE_AT), "--save-at", str(SAVE_AT), "--save", str(ckpt),
           "--log", str(tmp_path / "first.json"))
    first = steps(tmp_path / "first.json")
    assert sorted(first) == list(range(1, SAVE_AT + 1))
    for k in first:  # before the checkpoint, the two 4-rank runs agree
        assert first[k]["sha256"] == want[k]["sha256"]
        assert abs(first[k]["loss"] - want[k]["loss"]) <= 1e-9
    saved = Path(str(ckpt).format(step=SAVE_AT))
    assert saved.exists()
    import torch
    state = torch.load(saved)
    # TorchTitan style saves its torch dataset's state_dict() (the Stateful protocol) as
    # "dataloader"; Megatron style the checkpoint bytes as "zephon".
    data_state = (state["dataloader"]["zephon_checkpoint"] if style == "torchtitan"
                  else state["zephon"])
    assert state["step"] == SAVE_AT and isinstance(data_state, bytes)
    assert {"model", "optimizer"} <= set(state)

    for nproc in (2, 8):
        log = tmp_path / f"resume{nproc}.json"
        launch(style, nproc, daemon, data, tmp_path, "--tp", tp, "--run-id", "elastic",
               "--steps", str(STEPS), "--resume", str(saved), "--log", str(log))
        got = steps(log)
        assert sorted(got) == list(range(SAVE_AT + 1, STEPS + 1)), nproc
        for k in got:
            assert got[k]["sha256"] == want[k]["sha256"], f"{nproc} ranks, step {k}"
            assert got[k]["lanes"] == want[k]["lanes"]
            assert abs(got[k]["loss"] - want[k]["loss"]) <= 1e-9, \
                f"{nproc} ranks, step {k}: {got[k]['loss']!r} vs {want[k]['loss']!r}"


@pytest.mark.parametrize("style,extra,message", [
    ("torchtitan", ("--canonical-replicas", "6"),
     "canonical_replicas=6 is not divisible by the data-parallel size dp=4"),
    ("megatron", ("--tp", "2", "--global-batches", "12"),
     "global_batches=12 is not a multiple of canonical_replicas=8"),
])
def test_bad_config_refuses_to_start(style, extra, message, daemon, data, tmp_path):
    proc = launch(style, 4, daemon, data, tmp_path, "--steps", "1", *extra, check=False)
    assert proc.returncode != 0
    assert message in proc.stderr, proc.stderr
    assert not (tmp_path / "agg").exists() or not any((tmp_path / "agg").iterdir())
