"""The chain's reordering operators against a real daemon: shuffle algorithms, the
shuffle of packed rows, ensure_mixture with its figures in explain/status/metrics, and
the chain's position checks (in Python before attach, and in zephond)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import zephon
from zephon import errors

PAD = 0  # synthetic_documents' tokens are >= 1


def work_source(corpus, datasets=("web",), **kwargs):
    if len(datasets) == 1:
        ds = [zephon.Dataset.from_path("web", str(corpus), fmt="megatron")]
    else:  # One dataset per shard file.
        ds = [zephon.Dataset.from_path(name, str(corpus / f"shard-{i}"), fmt="megatron")
              for i, name in enumerate(datasets)]
    kwargs.setdefault("chunk_size", 32)
    return zephon.StaticMixtureWorkSource(ds, seed=7, **kwargs)


def rows(pipe, limit=None):
    out = []
    for step, batch in enumerate(pipe):
        out.extend(tuple(r) for r in np.array(batch["tokens"]).tolist())
        if limit is not None and step + 1 >= limit:
            break
    return out


def spec_hash(pipe):
    return re.search(r"spec_hash=(\w+)", pipe.explain()).group(1)


@pytest.mark.parametrize("algorithm", ["block", "block_warmup"])
def test_shuffle_algorithms_reorder_the_same_samples(corpus, daemon, algorithm):
    def run(**shuffle):
        pipe = (zephon.Pipeline(work_source(corpus)).shuffle(64, seed=3, **shuffle)
                .pack_flat(129).batch(2).options(daemon=daemon.socket, canonical_replicas=1))
        got = rows(pipe, limit=40)
        text, h = pipe.explain(), spec_hash(pipe)
        pipe.close()
        return got, text, h

    streaming, text, h = run()
    named, _, named_hash = run(algorithm="streaming")
    assert named == streaming and named_hash == h  # one algorithm, one spec hash
    assert "shuffle(buffer_size=64, seed=3) -> pack_flat" in text
    other, text, other_hash = run(algorithm=algorithm)
    assert other != streaming and other_hash != h
    assert f"algorithm={algorithm}" in text
    if algorithm == "block_warmup":
        assert "warmup_growth=1.5" in text
        again, _, _ = run(algorithm=algorithm, warmup_growth=3.0)
        assert again != other


def test_shuffle_of_rows_permutes_packed_rows(corpus, daemon):
    def run(shuffle_rows):
        pipe = zephon.Pipeline(work_source(corpus)).pack_flat(
            513, algorithm="best_fit", pad_token_id=PAD, num_bins=4)
        if shuffle_rows:
            pipe = pipe.shuffle(16, seed=5, algorithm="block")
        pipe = pipe.batch(4, drop_last=False).options(daemon=daemon.socket,
                                                       canonical_replicas=1)
        got = rows(pipe)
        text = pipe.explain()
        pipe.close()
        return got, text

    plain, _ = run(False)
    shuffled, text = run(True)
    assert shuffled != plain
    assert sorted(shuffled) == sorted(plain)  # the same rows, reordered
    assert "-> shuffle(buffer_size=16, seed=5, algorithm=block) of rows -> batch(4" in text


def test_ensure_mixture_reports_the_achieved_mixture(tmp_path, corpus):
    import urllib.request

    from conftest import Daemon

    d = Daemon(tmp_path, ["--metrics-address", "127.0.0.1:0"])
    try:
        ws = work_source(corpus, ("a", "b"), mixture={"a": 3, "b": 1})
        pipe = (zephon.Pipeline(ws).shuffle(64, seed=1).ensure_mixture(max_buffer_size=None)
                .pack_flat(129).batch(2)
                .options(daemon=d.socket, canonical_replicas=2, run_id="mix-run"))
        it = iter(pipe)
        for _ in range(20):
            next(it)
        text = pipe.explain()
        assert "ensure_mixture(max_buffer_size=None (exact)" in text
        m = re.search(r"mixture lane 0 \(emitted so far, by samples\): a ([\d.]+)/0\.7500 "
                      r"samples=(\d+)", text)
        assert m, text
        assert abs(float(m.group(1)) - 0.75) < 0.05 and int(m.group(2)) > 0
        inst = zephon.daemon_status(d.socket)["instances"][0]
        lanes = inst["mixture"]
        assert [int(x.get("lane", 0)) for x in lanes] == [0, 1]
        a = lanes[0]["datasets"][0]
        assert a["dataset"] == "a" and a["target_share"] == pytest.approx(0.75)
        assert abs(a["achieved_share"] - 0.75) < 0.05
        address = zephon.daemon_status(d.socket)["metrics_address"]
        with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as r:
            metrics = r.read().decode()
        for name in ("zephon_mixture_samples_total", "zephon_mixture_target_share",
                     "zephon_mixture_achieved_share"):
            assert re.search(rf'^{name}{{[^}}]*run="mix-run"[^}}]*lane="0"[^}}]*dataset="a"',
                             metrics, re.M), f"no {name} in:\n{metrics}"
        pipe.close()
    finally:
        rc = d.stop()
    assert rc == 0, d.log.read_text()


def test_no_mixture_figures_without_ensure_mixture(corpus, daemon):
    pipe = (zephon.Pipeline(work_source(corpus)).pack_flat(129).batch(2)
            .options(daemon=daemon.socket, canonical_replicas=1))
    next(iter(pipe))
    assert "mixture lane" not in pipe.explain()
    assert not zephon.daemon_status(daemon.socket)["instances"][0].get("mixture")
    pipe.close()


@pytest.mark.parametrize("build, needle", [
    (lambda p: p.pack_flat(65).batch(2).shuffle(4), "shuffle after batch"),
    (lambda p: p.shuffle(4).shuffle(8), "already shuffles before pack_flat"),
    (lambda p: p.pack_flat(65).shuffle(4).shuffle(8), "already shuffles between pack_flat"),
    (lambda p: p.pack_flat(65).ensure_mixture(), "before pack_flat"),
    (lambda p: p.ensure_mixture().ensure_mixture(), "already has ensure_mixture"),
    (lambda p: p.shuffle(4, algorithm="reservoir"), "algorithm='reservoir' is not one of"),
    (lambda p: p.shuffle(4, warmup_growth=2.0), "warmup_growth applies to algorithm"),
    (lambda p: p.shuffle(4, algorithm="block_warmup", warmup_growth=1.0),
     r"warmup_growth must be a number in \(1, 1024\]"),
    (lambda p: p.shuffle(0), "buffer_size must be an int >= 1"),
    (lambda p: p.ensure_mixture(drain_target_ratio=1.0), r"drain_target_ratio .* \[0, 1\)"),
    (lambda p: p.ensure_mixture(weight_by="bytes"), "weight_by='bytes' is not one of"),
    (lambda p: p.ensure_mixture(max_buffer_size=0), "or None"),
])
def test_chain_positions_are_checked_before_attach(corpus, build, needle):
    with pytest.raises(errors.InvalidOptionError, match=needle):
        build(zephon.Pipeline(work_source(corpus)))


def test_ensure_mixture_weighs_tokens_over_a_token_weighted_source(corpus):
    ws = work_source(corpus, weight_by="tokens")
    with pytest.raises(errors.InvalidOptionError, match="use weight_by='tokens'"):
        zephon.Pipeline(ws).ensure_mixture()
    zephon.Pipeline(ws).ensure_mixture(weight_by="tokens")


def test_zephond_refuses_ensure_mixture_after_pack_flat(corpus, daemon):
    # Past the Python checks (a hand-written operator): zephond's own refusal.
    pipe = zephon.Pipeline(work_source(corpus)).pack_flat(65).batch(2)
    pipe._operators.insert(1, {"ensure_mixture": {}})
    pipe = pipe.options(daemon=daemon.socket)
    with pytest.raises(errors.InvalidOptionError,
                       match=r"operators\[1\]: ensure_mixture must come before pack_flat"):
        pipe.attach()


def test_streaming_sends_the_operator_it_always_sent(corpus):
    ops = (zephon.Pipeline(work_source(corpus)).shuffle(100, seed=3)
           .pack_flat(65).batch(2)._request()["spec"]["operators"])
    assert ops[0] == {"shuffle": {"buffer_size": "100", "seed": "3"}}


def test_readme_shuffle_and_mixture_example_runs(tmp_path):
    from readme_blocks import run_readme_block

    stdout = run_readme_block(".ensure_mixture(", tmp_path)
    assert stdout.startswith("mixture lane 0 (emitted so far, by tokens): web "), stdout