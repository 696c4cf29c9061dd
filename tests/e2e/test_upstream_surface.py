"""The Python Zephon's surface on our package (issue 17): upstream's import paths, its
spellings of work-source and pipeline options, builders that mutate, and
tokenize(tokenizer_id=...) through a local Hugging Face cache or "__fallback__". Each
upstream spelling must give exactly the spec (and so the batches) of the native one."""
from __future__ import annotations

import json
import os
import shutil
import warnings

import numpy as np
import pytest

import zephon
from zephon import errors


def spec_of(pipe) -> dict:
    return pipe._request()["spec"]


def test_upstream_import_paths():
    from zephon.api import Pipeline
    from zephon.io import CacheOptions, Dataset, StoreOptions
    from zephon.types import SampleBatch, SampleId
    from zephon.work import MixtureSpec, StaticMixtureWorkSource, TokenEstimation
    from zephon.work.static_mixture import StaticMixtureWorkSource as Static2
    assert Pipeline is zephon.Pipeline and Dataset is zephon.Dataset
    assert StaticMixtureWorkSource is Static2 is zephon.StaticMixtureWorkSource
    assert SampleBatch is zephon.Batch and SampleId is zephon.SampleId
    assert MixtureSpec({"a": 2}).normalized == {"a": 1.0}
    assert TokenEstimation() == TokenEstimation()
    cache = StoreOptions.from_any({"cache": {"enabled": True, "limit_bytes": "2GiB"}}).cache
    assert cache.enabled and cache.limit_bytes == 2 << 30
    assert CacheOptions.from_any(None).enabled is False
    with pytest.raises(TypeError, match="no field"):
        CacheOptions.from_any({"size": 1})
    with pytest.raises(ValueError, match="not a size"):
        CacheOptions(limit_bytes="lots")


def test_upstream_work_source_spellings_give_the_native_spec(corpus):
    a = zephon.Dataset.from_path(name="a", path=str(corpus / "shard-0"), fmt="megatron")
    b = zephon.Dataset.from_path(name="b", path=str(corpus / "shard-1"), fmt="megatron")
    from zephon.work import MixtureSpec, TokenEstimation
    upstream = zephon.StaticMixtureWorkSource(
        datasets=[a, b], mixture=MixtureSpec({"a": 1.0, "b": 3.0}), exhausted_policy=None,
        token_estimation=TokenEstimation(), seed=3)
    native = zephon.StaticMixtureWorkSource([a, b], mixture={"a": 1.0, "b": 3.0},
                                            weight_by="tokens", seed=3)
    assert upstream.to_spec() == native.to_spec()
    with pytest.raises(ValueError, match="do not also pass weight_by"):
        zephon.StaticMixtureWorkSource([a], token_estimation=TokenEstimation(),
                                       weight_by="samples_or_tokens")
    with pytest.raises(ValueError, match="finite numbers > 0"):
        MixtureSpec({"a": 0})


def test_builders_mutate_and_return_the_pipeline(corpus):
    ds = zephon.Dataset.from_path("web", str(corpus), fmt="megatron")
    p = zephon.Pipeline(zephon.StaticMixtureWorkSource([ds]))
    assert p.shuffle(64) is p
    p.pack_flat(65)  # not reassigned: kept, as upstream
    p.batch(2)
    chained = zephon.Pipeline(zephon.StaticMixtureWorkSource([ds])).shuffle(64).pack_flat(65) \
        .batch(2)
    assert spec_of(p) == spec_of(chained)
    assert [next(iter(op)) for op in p._operators] == ["shuffle", "pack_flat", "batch"]


def test_upstream_options_are_accepted_mapped_or_refused(corpus, daemon):
    ds = zephon.Dataset.from_path("web", str(corpus), fmt="megatron")
    from zephon.io import CacheOptions, StoreOptions
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the known upstream knobs warn nothing
        p = (zephon.Pipeline(zephon.StaticMixtureWorkSource([ds], seed=1, chunk_size=32))
             .decode_text()._delay(max_delay_ms=1.0, parallelism=4).fetch_parallelism(8)
             .prefetch(buffer_size=4, parallelism=2)
             .pack_flat(65, parallelism=4).shuffle(buffer_size=None, seed=2, parallelism=2)
             .batch(2)
             .options(daemon=daemon.socket, deterministic=True, max_workers=3, runner="process",
                      mtp_mode=True, op_queue_capacity=4, default_stage_prefetch=2,
                      allow_latency_flush_in_deterministic=True, mtp_auto_checkpoint=False,
                      io_options=StoreOptions(cache=CacheOptions.from_any(
                          {"enabled": True, "root": "/tmp/x", "limit_bytes": "500gb"}))))
    request = p._request()
    assert request["execution"] == {"num_threads": 3}  # max_workers -> num_threads
    assert request["spec"]["operators"][1]["shuffle"]["buffer_size"] == "8192"
    native = (zephon.Pipeline(zephon.StaticMixtureWorkSource([ds], seed=1, chunk_size=32))
              .pack_flat(65).shuffle(8192, seed=2).batch(2).options(num_threads=3))
    assert request["spec"] == native._request()["spec"]
    batch = next(iter(p))
    assert batch["tokens"].shape == (2, 65)
    assert batch.lane_ids == (batch.lane, batch.lane)
    p.close()
    with pytest.raises(errors.InvalidOptionError, match="deterministic=False is not supported"):
        zephon.Pipeline(zephon.StaticMixtureWorkSource([ds])).options(deterministic=False)
    with pytest.warns(UserWarning, match="'max_worker' ignored; did you mean 'max_workers'"):
        zephon.Pipeline(zephon.StaticMixtureWorkSource([ds])).options(max_worker=2)
    # A misspelt identity option is never dropped quietly (ranks would share data).
    with pytest.raises(TypeError, match="'dp_group'; did you mean 'dp_group_id'"):
        zephon.Pipeline(zephon.StaticMixtureWorkSource([ds])).options(dp_group=1)
    with pytest.raises(TypeError, match="StoreOptions has no field"):
        zephon.Pipeline(zephon.StaticMixtureWorkSource([ds])).options(io_options={"x": 1})
    with pytest.raises(RuntimeError, match="prefetch: already called"):
        zephon.Pipeline(zephon.StaticMixtureWorkSource([ds])).prefetch(2).prefetch(2)
    with pytest.raises(errors.InvalidOptionError, match="parallelism must be an int >= 1"):
        zephon.Pipeline(zephon.StaticMixtureWorkSource([ds])).pack_flat(65, parallelism=0)
    with pytest.raises(errors.InvalidOptionError, match="decode_text: call it before"):
        zephon.Pipeline(zephon.StaticMixtureWorkSource([ds])).pack_flat(65).decode_text()


def write_text(tmp_path, n=40):
    path = tmp_path / "text.jsonl"
    path.write_text("".join(json.dumps({"text": f"alpha-{i} über ✓"}) + "\n" for i in range(n)),
                    encoding="utf-8")
    return zephon.Dataset.from_path("t", str(path), fmt="jsonl")


def test_fallback_tokenizer_encodes_every_text_byte_by_byte(daemon, tmp_path):
    ds = write_text(tmp_path)
    p = (zephon.Pipeline(zephon.StaticMixtureWorkSource([ds], seed=0, chunk_size=8))
         .decode_text().tokenize(tokenizer_id="__fallback__", parallelism=4,
                                 preserve_upstream_payload=True, special_tokens="bos_eos")
         .pack_flat(33, algorithm="first_fit", num_bins=1, pad_token_id=0)
         .batch(1).options(daemon=daemon.socket, canonical_replicas=1))
    assert p.preflight_tokenizers()["tokenize"]["loaded"] is True
    batch = next(iter(p))
    tokens = np.array(batch["tokens"])[0]
    valid = int(np.array(batch["valid_tokens"])[0])
    i = batch.ids[0].index
    text = f"alpha-{i} über ✓".encode("utf-8")
    # <s> = 1, byte b = 3 + b, </s> = 2: exactly the UTF-8 bytes of the record.
    doc = [1] + [3 + b for b in text] + [2]
    assert tokens[:len(doc)].tolist() == doc and valid >= len(doc)
    p.close()
    with pytest.raises(errors.InvalidOptionError, match="exactly one"):
        zephon.Pipeline(zephon.StaticMixtureWorkSource([ds])).tokenize()
    with pytest.raises(errors.InvalidOptionError, match="add_attention_mask=True"):
        zephon.Pipeline(zephon.StaticMixtureWorkSource([ds])).tokenize(
            tokenizer_id="__fallback__", add_attention_mask=True)


def test_tokenizer_id_resolves_through_the_local_hugging_face_cache(daemon, tmp_path,
                                                                   monkeypatch):
    from test_tokenize_pipeline import tiny_tokenizer_json
    hub = tmp_path / "hf" / "hub"
    model = hub / "models--acme--tiny"
    old, new = model / "snapshots" / "0ld", model / "snapshots" / "c0ffee"
    for snap in (old, new):
        snap.mkdir(parents=True)
    (new / "tokenizer.json").write_text(tiny_tokenizer_json(), encoding="utf-8")
    (model / "refs").mkdir()
    (model / "refs" / "main").write_text("c0ffee")
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    ds = write_text(tmp_path)

    def digest(**tokenize):
        p = (zephon.Pipeline(zephon.StaticMixtureWorkSource([ds], seed=0, chunk_size=8))
             .tokenize(**tokenize).pack_flat(17).batch(2)
             .options(daemon=daemon.socket, canonical_replicas=1))
        out = [np.array(b["tokens"]).tolist() for b in p]
        p.close()
        return out

    by_id = digest(tokenizer_id="acme/tiny", special_tokens="eos")
    assert by_id and by_id == digest(tokenizer=str(new / "tokenizer.json"),
                                     special_tokens="eos")
    with pytest.raises(errors.NotFoundError, match=r"'acme/absent' is not a local path and is "
                                                   r"not in the Hugging Face cache .*"
                                                   r"huggingface-cli download acme/absent"):
        zephon.Pipeline(zephon.StaticMixtureWorkSource([ds])).tokenize(tokenizer_id="acme/absent")
    shutil.rmtree(new)
    # refs/main names a snapshot that is gone: the newest remaining one has no tokenizer.
    with pytest.raises(errors.NotFoundError, match="0ld holds no tokenizer.json"):
        zephon.Pipeline(zephon.StaticMixtureWorkSource([ds])).tokenize(tokenizer_id="acme/tiny")
    assert os.path.isdir(old)


def test_readme_coming_from_upstream_block_runs(tmp_path):
    from readme_blocks import run_readme_block
    out = run_readme_block("MixtureSpec({\"web\": 1.0})", tmp_path)
    assert "upstream-style batch: (2, 65)" in out, out
