"""Per-dataset repetition through the daemon (StaticMixtureWorkSource's
exhausted_policy / stop_after_passes / max_repeats maps and reshuffle_on_repeat): a filler
dataset repeats while another ends the stream, replayed passes repeat the first pass's
order, and the combinations upstream refuses are refused naming the dataset."""
from __future__ import annotations

import collections

import numpy as np
import pytest

import zephon

DOC = 8  # Tokens per document: pack_flat(max_length=16) holds exactly two.


@pytest.fixture
def two_sets(tmp_path):
    zephon.write_megatron_dataset(tmp_path / "small", [np.full(DOC, i + 1) for i in range(10)])
    zephon.write_megatron_dataset(tmp_path / "large", [np.full(DOC, i + 101) for i in range(40)])
    return (zephon.Dataset.from_path("small", str(tmp_path / "small"), fmt="megatron"),
            zephon.Dataset.from_path("large", str(tmp_path / "large"), fmt="megatron"))


def delivered(ws, socket, run_id):
    pipe = (zephon.Pipeline(ws).pack_flat(max_length=2 * DOC).batch(1)
            .options(daemon=socket, run_id=run_id))
    ids = [(i.dataset, i.index) for b in pipe for i in b.ids]
    pipe.close()
    return ids


def test_filler_repeats_while_the_other_dataset_stops(daemon, two_sets):
    ws = zephon.StaticMixtureWorkSource(
        list(two_sets), mixture=[1, 1], chunk_size=4, seed=3,
        exhausted_policy={"small": "repeat", "large": "stop"})
    uses = collections.Counter(delivered(ws, daemon.socket, "filler"))
    # 2 + 2 per chunk: "large" (40) runs out after 20 chunks, "small" (10) looped 4 times.
    assert {k: v for k, v in uses.items() if k[0] == 1} == {(1, i): 1 for i in range(40)}
    assert {k: v for k, v in uses.items() if k[0] == 0} == {(0, i): 4 for i in range(10)}
    # Per-dataset stop_after_passes: "small" must finish 6 passes (30 chunks) while
    # "large" repeats as filler.
    ws = zephon.StaticMixtureWorkSource(
        list(two_sets), mixture=[1, 1], chunk_size=4, seed=3,
        exhausted_policy={"large": "repeat"}, stop_after_passes={"small": 6})
    uses = collections.Counter(delivered(ws, daemon.socket, "floor"))
    assert sum(v for k, v in uses.items() if k[0] == 0) == 60
    assert sum(v for k, v in uses.items() if k[0] == 1) == 60


def test_reshuffle_on_repeat_false_replays_each_pass(daemon, two_sets):
    small = two_sets[0]
    passes = {}
    for reshuffle in (True, False):
        ws = zephon.StaticMixtureWorkSource([small], chunk_size=5, seed=11,
                                            shuffle_within_shard=True,
                                            exhausted_policy="repeat", max_repeats=3,
                                            reshuffle_on_repeat=reshuffle)
        ids = delivered(ws, daemon.socket, f"reshuffle-{reshuffle}")
        assert len(ids) == 40
        passes[reshuffle] = [ids[10 * e:10 * (e + 1)] for e in range(4)]
    assert all(p == passes[False][0] for p in passes[False])
    assert passes[True][0] == passes[False][0]  # Pass 0 is the same order either way.
    assert any(p != passes[True][0] for p in passes[True][1:])
    # The map form: only "small" replays.
    ws = zephon.StaticMixtureWorkSource([small], chunk_size=5, seed=11,
                                        shuffle_within_shard=True, exhausted_policy="repeat",
                                        max_repeats=3, reshuffle_on_repeat={"small": False})
    ids = delivered(ws, daemon.socket, "reshuffle-map")
    assert [ids[10 * e:10 * (e + 1)] for e in range(4)] == passes[False]


def test_refusals_name_the_dataset(daemon, two_sets):
    with pytest.raises(ValueError, match=r"exhausted_policy names unknown datasets \['web'\]"):
        zephon.StaticMixtureWorkSource(list(two_sets), exhausted_policy={"web": "repeat"})
    with pytest.raises(ValueError, match=r"stop_after_passes names unknown datasets \['x'\]"):
        zephon.StaticMixtureWorkSource(list(two_sets), stop_after_passes={"x": 2})
    with pytest.raises(ValueError, match=r"exhausted_policy\['small'\]='forever' is not"):
        zephon.StaticMixtureWorkSource(list(two_sets), exhausted_policy={"small": "forever"})
    with pytest.raises(TypeError, match=r"reshuffle_on_repeat\['small'\] must be a bool"):
        zephon.StaticMixtureWorkSource(list(two_sets), reshuffle_on_repeat={"small": 0})
    ws = zephon.StaticMixtureWorkSource(list(two_sets), exhausted_policy={"large": "stop"},
                                        stop_after_passes={"large": 2})
    with pytest.raises(zephon.ZephonError,
                       match=r"\('large'\) sets stop_after_passes = 2 with exhausted_policy "
                             r"'stop'"):
        delivered(ws, daemon.socket, "refused-stop")
    ws = zephon.StaticMixtureWorkSource(list(two_sets), exhausted_policy="repeat",
                                        max_repeats={"small": 1}, stop_after_passes={"small": 2})
    with pytest.raises(zephon.ZephonError,
                       match=r"\('small'\) sets both stop_after_passes = 2 and max_repeats = 1"):
        delivered(ws, daemon.socket, "refused-max")
