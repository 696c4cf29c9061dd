"""zephon.inspect_checkpoint (offline decoding of checkpoint() bytes) and the mid-window
checkpoint warning (issue 16), with a real zephond."""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import zephon
from zephond_process import Daemon, private_dir

C = 2


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("inspect-corpus")
    zephon.write_megatron_dataset(root / "web", [np.full(12, i + 1) for i in range(200)])
    return root / "web"


@pytest.fixture
def daemon(tmp_path):
    d = Daemon(private_dir(tmp_path / "node"), peer=False)
    yield d
    d.stop()


def make_pipe(corpus, socket, **options):
    ds = zephon.Dataset.from_path("web", str(corpus), fmt="megatron")
    ws = zephon.StaticMixtureWorkSource([ds], seed=7, chunk_size=8)
    return (zephon.Pipeline(ws).shuffle(buffer_size=4, seed=3).pack_flat(max_length=16)
            .batch(1).options(daemon=socket, canonical_replicas=C, **options))


def checkpoint_after(pipe, n: int):
    """Takes `n` batches, then checkpoints; returns (bytes, messages of the warnings)."""
    it = iter(pipe)
    for _ in range(n):
        next(it)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        state = pipe.checkpoint()
    return state, [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]


def test_inspect_checkpoint_decodes_run_spec_lanes_and_ranks(corpus, daemon, tmp_path):
    pipe = make_pipe(corpus, daemon.socket, run_id="inspected",
                     aggregate_dir=str(tmp_path / "agg"))
    state, _ = checkpoint_after(pipe, 4)
    pipe.close()
    daemon.stop()  # decoding needs no daemon

    info = zephon.inspect_checkpoint(state)
    assert info["run_id"] == "inspected"
    assert info["round"] == 0
    assert info["canonical_replicas"] == C
    assert info["world_size"] == 1 and info["dp_degree"] == 1
    assert info["ranks"] == [{"global_rank": 0, "dp_group_id": 0, "taken": 4,
                              "daemon": info["ranks"][0]["daemon"]}]
    assert [lane["lane"] for lane in info["lanes"]] == [0, 1]
    assert [lane["next_batch_index"] for lane in info["lanes"]] == [2, 2]
    assert info["total_batches"] == 4 and info["mid_window"] is False
    assert len(info["spec_hash"]) > 0 and info["created_unix_ms"] > 0
    spec = info["spec"]
    assert spec["seed"] == 7 and spec["canonical_replicas"] == C and spec["chunk_size"] == 8
    (ds,) = spec["datasets"]
    assert ds["name"] == "web" and ds["format"] == "megatron"
    assert Path(ds["path"]).name == "web"
    assert [op["op"] for op in spec["operators"]] == ["shuffle", "pack_flat", "batch"]
    assert spec["operators"][0]["buffer_size"] == 4 and spec["operators"][0]["seed"] == 3
    assert spec["operators"][1]["max_length"] == 16
    assert spec["operators"][2]["microbatch_size"] == 1
    (files,) = info["dataset_files"]
    assert files["name"] == "web" and files["samples"] == 200 and files["shards"] >= 1
    # The same bytes decode to the same dict: fit for comparing stored states.
    assert zephon.inspect_checkpoint(bytearray(state)) == info


def test_inspect_checkpoint_refuses_what_is_not_a_checkpoint(corpus, daemon):
    pipe = make_pipe(corpus, daemon.socket)
    state, _ = checkpoint_after(pipe, 2)
    pipe.close()
    with pytest.raises(ValueError, match="not a Zephon checkpoint"):
        zephon.inspect_checkpoint(b"PAR1 this is some other file")
    with pytest.raises(ValueError, match="empty"):
        zephon.inspect_checkpoint(b"")
    with pytest.raises(ValueError, match="(?i)truncat"):
        zephon.inspect_checkpoint(state[:-3])
    damaged = bytearray(state)
    damaged[-1] ^= 0xFF
    with pytest.raises(ValueError, match="(?i)crc|checksum"):
        zephon.inspect_checkpoint(bytes(damaged))
    with pytest.raises(TypeError, match="bytes"):
        zephon.inspect_checkpoint("a string")


def test_mid_window_checkpoint_warns_once_per_run_naming_step_and_c(corpus, daemon):
    pipe = make_pipe(corpus, daemon.socket)
    state, warned = checkpoint_after(pipe, 3)  # lanes at 2 and 1 batches
    assert len(warned) == 1, warned
    assert "mid-window" in warned[0] and "C=2" in warned[0]
    assert "global batch 3" in warned[0]
    assert zephon.inspect_checkpoint(state)["mid_window"] is True
    state, warned = checkpoint_after(pipe, 2)  # global batch 5: mid-window again
    assert warned == []  # once per run
    assert zephon.inspect_checkpoint(state)["mid_window"] is True
    pipe.close()
    daemon.stop()  # flushes its log
    assert daemon.log.read_text().count("was taken mid-window") == 1


def test_checkpoint_at_a_whole_number_of_lane_rounds_does_not_warn(corpus, daemon):
    pipe = make_pipe(corpus, daemon.socket)
    for n in (4, 2):  # global batches 4 and 6: multiples of C
        state, warned = checkpoint_after(pipe, n)
        assert warned == []
        assert zephon.inspect_checkpoint(state)["mid_window"] is False
    pipe.close()
