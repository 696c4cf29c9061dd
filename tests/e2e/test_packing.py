"""pack_flat's padding algorithms against a real daemon: padded rows, valid_tokens,
to_training's padding handling, the fill figures in explain/status/metrics, and the
option checks (in Python before attach, and in zephond)."""
from __future__ import annotations

import numpy as np
import pytest

import zephon
from zephon import errors

from conftest import pipeline

PAD = 0  # synthetic_documents' tokens are >= 1, so a pad cell is recognisable
L, B = 513, 4  # documents are 20..400 tokens: every one fits, rows end in padding


def padded_pipeline(corpus, socket, algorithm="best_fit", **pack):
    ds = zephon.Dataset.from_path("web", str(corpus), fmt="megatron")
    ws = zephon.StaticMixtureWorkSource([ds], seed=7, chunk_size=32)
    if algorithm in ("first_fit", "best_fit"):
        pack.setdefault("num_bins", 8)
    return (zephon.Pipeline(ws)
            .pack_flat(L, algorithm=algorithm, pad_token_id=PAD, **pack)
            .batch(B).options(daemon=socket, canonical_replicas=1))


def segments_ok(cu, positions_flat):
    assert cu[0] == 0 and cu[-1] == positions_flat.size and np.all(np.diff(cu) > 0)
    for a, b in zip(cu[:-1], cu[1:]):
        assert np.array_equal(positions_flat[a:b], positions_flat[a] + np.arange(b - a))


@pytest.mark.parametrize("algorithm", ["first_fit", "best_fit", "best_fit_wrap"])
def test_padded_rows_and_to_training(corpus, daemon, algorithm):
    pipe = padded_pipeline(corpus, daemon.socket, algorithm)
    padded_rows = 0
    for step, batch in enumerate(pipe):
        tokens, positions = np.array(batch["tokens"]), np.array(batch["positions"])
        valid = np.array(batch["valid_tokens"])
        assert valid.shape == (B,) and valid.dtype == np.int32
        for r in range(B):
            v = int(valid[r])
            assert 0 < v <= L
            assert np.all(tokens[r, :v] != PAD), "real cells come first"
            assert np.all(tokens[r, v:] == PAD)
            # The padding is one segment of its own: positions 0, 1, ...
            assert np.array_equal(positions[r, v:], np.arange(L - v))
            padded_rows += v < L
        out = batch.to_training(as_torch=False, return_padding_mask=True, return_labels=True,
                                return_num_valid_tokens=True, return_cu_seqlens=True,
                                ignore_index=-5, dtype=None)
        mask = out["padding_mask"]
        assert mask.shape == (B, L - 1) and mask.dtype == bool
        assert np.array_equal(mask, np.arange(L - 1)[None, :] < valid[:, None])
        labels = out["labels"]
        target_is_pad = np.arange(1, L)[None, :] >= valid[:, None]
        assert np.all(labels[target_is_pad] == -5)
        assert np.array_equal(labels[~target_is_pad], tokens[:, 1:][~target_is_pad])
        assert out["num_valid_tokens"] == int((valid - 1).sum())
        # Masked labels are a copy; a batch of full rows keeps the zero-copy view.
        assert np.shares_memory(labels, batch["tokens"]) == bool((valid == L).all())
        segments_ok(out["cu_seqlens"], positions[:, :-1].reshape(-1))
        no_labels = batch.to_training(as_torch=False, return_labels=False,
                                      return_padding_mask=True, flatten=True)
        assert no_labels["padding_mask"].shape == (B * L,)
        assert int(no_labels["padding_mask"].sum()) == int(valid.sum())
        if step == 5:
            break
    if algorithm == "best_fit_wrap":
        # Full rows until a flush group's end (8 chunks of 32 documents, ~26 batches).
        assert padded_rows == 0
    else:
        assert padded_rows > 0
    text = pipe.explain()
    assert "pack_flat(max_length=513, " + algorithm in text
    assert "pad_token_id=0" in text
    assert "packing lane 0 (planned so far): records=" in text and " fill=" in text
    inst = zephon.daemon_status(daemon.socket)["instances"][0]
    lane = inst["packing"][0]
    assert int(lane["records"]) >= 6 * B
    assert int(lane["tokens"]) + int(lane.get("padding_cells", 0)) == int(lane["records"]) * L
    if algorithm != "best_fit_wrap":
        assert int(lane["padding_cells"]) > 0
    pipe.close()


def test_fill_figures_reach_metrics(tmp_path, corpus):
    import re
    import urllib.request

    from conftest import Daemon

    d = Daemon(tmp_path, ["--metrics-address", "127.0.0.1:0"])
    try:
        pipe = padded_pipeline(corpus, d.socket, "best_fit").options(run_id="pack-run")
        it = iter(pipe)
        for _ in range(3):
            next(it)
        address = zephon.daemon_status(d.socket)["metrics_address"]
        with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as r:
            text = r.read().decode()
        samples = {}
        for name in ("zephon_pack_tokens_total", "zephon_pack_padding_cells_total",
                     "zephon_pack_fill_ratio", "zephon_pack_dropped_samples_total"):
            m = re.search(rf'^{name}{{[^}}]*run="pack-run"[^}}]*lane="0"[^}}]*}} (\S+)$', text,
                          re.M)
            assert m, f"no {name} for lane 0 in:\n{text}"
            samples[name] = float(m.group(1))
        tokens, padding = samples["zephon_pack_tokens_total"], samples["zephon_pack_padding_cells_total"]
        assert tokens > 0 and padding > 0
        assert samples["zephon_pack_fill_ratio"] == pytest.approx(tokens / (tokens + padding))
        pipe.close()
    finally:
        rc = d.stop()
    assert rc == 0, d.log.read_text()


def test_wrap_batches_have_no_valid_tokens_and_a_full_padding_mask(corpus, daemon):
    pipe = pipeline(corpus, daemon.socket, max_length=65, microbatch=2, canonical_replicas=1)
    batch = next(iter(pipe))
    assert "valid_tokens" not in batch.keys()
    out = batch.to_training(as_torch=False, return_padding_mask=True, return_labels=True,
                            dtype=None)
    assert out["padding_mask"].shape == (2, 64) and out["padding_mask"].all()
    assert np.shares_memory(out["labels"], batch["tokens"])  # nothing masked: still a view
    assert "packing lane 0" in pipe.explain()
    pipe.close()


def test_explain_sums_the_packing_of_many_lanes(corpus, daemon):
    # 12 owned lanes: one total line and the least filled lane instead of 12 lines.
    pipe = padded_pipeline(corpus, daemon.socket).options(canonical_replicas=12)
    it = iter(pipe)
    for _ in range(12):
        next(it)
    text = pipe.explain()
    assert "packing 12 lanes (planned so far): records=" in text
    assert "packing least filled lane " in text
    assert "packing lane " not in text
    assert len(zephon.daemon_status(daemon.socket)["instances"][0]["packing"]) == 12
    pipe.close()


def test_oversized_documents_are_dropped_or_split_and_counted(corpus, daemon):
    # max_length 129: documents of 20..400 tokens, many oversized.
    for drop, field in ((True, "dropped_samples"), (False, "split_samples")):
        ds = zephon.Dataset.from_path("web", str(corpus), fmt="megatron")
        pipe = (zephon.Pipeline(zephon.StaticMixtureWorkSource([ds], seed=3, chunk_size=32))
                .pack_flat(129, algorithm="first_fit", pad_token_id=PAD, num_bins=4,
                           drop_oversized=drop)
                .batch(2).options(daemon=daemon.socket, canonical_replicas=1))
        it = iter(pipe)
        for _ in range(10):
            next(it)
        lane = zephon.daemon_status(daemon.socket)["instances"][0]["packing"][0]
        assert int(lane.get(field, 0)) > 0, lane
        assert f"{field}=" in pipe.explain()
        pipe.close()


@pytest.mark.parametrize("kwargs, needle", [
    (dict(algorithm="best_fit", num_bins=4), "needs pad_token_id"),
    (dict(algorithm="best_fit", pad_token_id=0), "needs num_bins"),
    (dict(algorithm="first_fit", pad_token_id=0, num_bins=0), r"num_bins must be an int in \[1, 4096\]"),
    (dict(algorithm="wrap", pad_token_id=0), "'wrap' never pads"),
    (dict(algorithm="best_fit_wrap", pad_token_id=0, num_bins=2), "num_bins applies"),
    (dict(algorithm="best_fit", pad_token_id=0, num_bins=2, candidate_pool_size=4),
     "candidate_pool_size applies to best_fit_wrap"),
    (dict(algorithm="greedy"), "algorithm='greedy' is not one of"),
    (dict(algorithm="best_fit", pad_token_id=-1, num_bins=2), "pad_token_id must be"),
])
def test_options_are_checked_before_attach(corpus, kwargs, needle):
    ds = zephon.Dataset.from_path("web", str(corpus), fmt="megatron")
    with pytest.raises(errors.InvalidOptionError, match=needle):
        zephon.Pipeline(zephon.StaticMixtureWorkSource([ds])).pack_flat(65, **kwargs)


def test_zephond_refuses_a_padding_algorithm_without_pad_token_id(corpus, daemon):
    # Past the Python checks (a hand-written operator): zephond's own refusal.
    ds = zephon.Dataset.from_path("web", str(corpus), fmt="megatron")
    pipe = zephon.Pipeline(zephon.StaticMixtureWorkSource([ds])).batch(2)
    pipe._operators.insert(0, {"pack_flat": {"max_length": "65", "algorithm": "best_fit",
                                             "num_bins": 4}})
    pipe = pipe.options(daemon=daemon.socket)
    with pytest.raises(errors.InvalidOptionError,
                       match=r"operators\[0\] pack_flat: algorithm 'best_fit' pads its "
                             r"records and needs pad_token_id"):
        pipe.attach()


def test_readme_packing_example_runs(tmp_path):
    from readme_blocks import run_readme_block

    lines = run_readme_block('algorithm="best_fit"', tmp_path).splitlines()
    assert lines[0].startswith("0 [") and "fill=" in lines[-1], "\n".join(lines)


def test_wrap_sends_the_operator_it_always_sent(corpus):
    # The spec hash covers the operator: a wrap pipeline must send no new field.
    ds = zephon.Dataset.from_path("web", str(corpus), fmt="megatron")
    ws = zephon.StaticMixtureWorkSource([ds])
    ops = zephon.Pipeline(ws).pack_flat(65).batch(2)._request()["spec"]["operators"]
    assert ops[0] == {"pack_flat": {"max_length": "65", "algorithm": "wrap",
                                    "emit_positions": True}}
    best = (zephon.Pipeline(ws).pack_flat(65, algorithm="best_fit", pad_token_id=3, num_bins=4)
            ._request()["spec"]["operators"][0]["pack_flat"])
    assert best == {"max_length": "65", "algorithm": "best_fit", "emit_positions": True,
                    "pad_token_id": 3, "num_bins": 4, "drop_oversized": True}
