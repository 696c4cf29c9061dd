"""Batch.to_training accepts upstream zephon's keyword arguments (issue 17): tokens_field,
dtype, exclude_fields, position_mode, eos_mask_loss/eos_token_id, and a rename error that
is both KeyError (ours) and ValueError (upstream). Real batches through a daemon."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import zephon
from zephon.corpus import synthetic_documents

from conftest import pipeline

L, B = 33, 2
EOS = 7


@pytest.fixture(scope="module")
def eos_corpus(tmp_path_factory):
    """Documents that each end with EOS (and hold no other EOS), so wrap packing puts
    EOS -> next document's first token predictions inside rows."""
    root = tmp_path_factory.mktemp("eos_corpus")
    docs = []
    for d in synthetic_documents(300, seed=5, min_len=3, max_len=20):
        d = np.where(d == EOS, EOS + 1, d)
        docs.append(np.append(d, EOS))
    zephon.write_megatron_dataset(root / "shard-0", docs, dtype=np.uint16)
    return root


def views(batch, **kw):
    """to_training with labels and the ring's own dtype (zero-copy views where possible),
    the settings these tests check unless a call says otherwise; upstream's defaults
    (no labels, int64) are checked in test_dtype."""
    kw.setdefault("return_labels", True)
    kw.setdefault("dtype", None)
    return batch.to_training(**kw)


def open_pipe(corpus, daemon, **kw):
    return pipeline(corpus, daemon.socket, max_length=L, microbatch=B,
                    canonical_replicas=1, max_open_batches=1, **kw)


def test_tokens_field_and_exclude_fields(corpus, daemon):
    pipe = open_pipe(corpus, daemon)
    batch = next(iter(pipe))
    tokens = np.array(batch["tokens"])
    for name in ("auto", "input_ids", "tokens"):
        out = views(batch, as_torch=False, tokens_field=name)
        assert np.array_equal(out["input_ids"], tokens[:, :-1]), name
        assert np.array_equal(out["labels"], tokens[:, 1:]), name
    for bad in ("text", "token_ids", "positions"):
        with pytest.raises(ValueError, match="tokens_field") as info:
            views(batch, tokens_field=bad)
        assert "'tokens'" in str(info.value) and "'positions'" in str(info.value)
    out = views(batch, as_torch=False, exclude_fields=("ids", "texts"))
    assert set(out) == {"input_ids", "labels", "positions"}
    # Exclusion applies after renaming: the new name is what gets dropped.
    out = views(batch, as_torch=False, rename_fields={"positions": "position_ids"},
                            exclude_fields=("position_ids", "nope"))
    assert set(out) == {"input_ids", "labels", "ids"}
    with pytest.raises(TypeError, match="exclude_fields"):
        views(batch, exclude_fields="ids")
    pipe.close()


def test_dtype(corpus, daemon):
    pipe = open_pipe(corpus, daemon)
    batch = next(iter(pipe))
    tokens, positions = batch["tokens"], batch["positions"]
    assert tokens.dtype != np.int64  # so that int64 is a dtype change
    saved = np.array(tokens)

    # Upstream's default (dtype="auto"): int64 copies, no labels.
    default = batch.to_training(as_torch=False)
    assert set(default) == {"input_ids", "positions", "ids"}
    assert default["input_ids"].dtype == np.int64
    assert not np.shares_memory(default["input_ids"], tokens)
    # dtype=None: unchanged, zero-copy views in the ring's dtype.
    view = batch.to_training(as_torch=False, dtype=None)
    assert view["input_ids"].dtype == tokens.dtype
    assert np.shares_memory(view["input_ids"], tokens)

    for dt in (torch.long, torch.int64, "auto"):
        out = views(batch, as_torch=True, dtype=dt, return_cu_seqlens=True,
                                return_loss_mask=True, return_padding_mask=True)
        for key in ("input_ids", "labels", "positions"):
            assert out[key].dtype == torch.int64, (dt, key)
        assert out["cu_seqlens"].dtype == torch.int32
        assert out["loss_mask"].dtype == torch.bool
        assert out["padding_mask"].dtype == torch.bool
        assert torch.equal(out["input_ids"], torch.from_numpy(tokens[:, :-1].astype(np.int64)))
        assert torch.equal(out["labels"], torch.from_numpy(tokens[:, 1:].astype(np.int64)))
        assert torch.equal(out["positions"],
                           torch.from_numpy(positions[:, :-1].astype(np.int64)))
        # A copy: writable, not in the shared-memory slot.
        for key in ("input_ids", "labels", "positions"):
            arr = out[key].numpy()
            assert not np.shares_memory(arr, tokens) and not np.shares_memory(arr, positions)
        out["input_ids"][0, 0] = -1
        out["labels"][0, 0] = -1
        assert np.array_equal(tokens, saved)  # the ring is untouched

    out = views(batch, as_torch=False, dtype=torch.int32, flatten=True)
    assert out["input_ids"].dtype == np.int32 and out["labels"].dtype == np.int32
    assert np.array_equal(out["labels"], tokens[:, 1:].reshape(-1).astype(np.int32))
    # The dtype the ring already has (positions are int32) still gives a copy.
    assert positions.dtype == np.int32
    out = views(batch, as_torch=False, dtype=torch.int32)
    assert out["positions"].dtype == np.int32
    assert np.array_equal(out["positions"], positions[:, :-1])
    assert not np.shares_memory(out["positions"], positions)
    assert out["positions"].flags.writeable
    out = views(batch, as_torch=False, dtype=np.int64)
    assert out["input_ids"].dtype == np.int64 and out["positions"].dtype == np.int64
    # An explicit dtype always copies, even with masked labels and no labels.
    out = views(batch, as_torch=False, dtype="auto", return_labels=False)
    assert out["input_ids"].dtype == np.int64
    assert not np.shares_memory(out["input_ids"], tokens)
    masked = views(batch, as_torch=False, dtype=np.int32,
                               mask_document_boundaries=True, ignore_index=-100)
    boundary = positions[:, 1:] == 0
    want = tokens[:, 1:].astype(np.int32)
    want[boundary] = -100
    assert masked["labels"].dtype == np.int32 and np.array_equal(masked["labels"], want)
    for bad in (torch.float32, np.uint16, "float64", "bogus"):
        with pytest.raises(ValueError, match="dtype"):
            views(batch, dtype=bad)
    pipe.close()


def test_position_mode(eos_corpus, daemon):
    pipe = open_pipe(eos_corpus, daemon)  # short documents: boundaries inside rows
    batch = next(iter(pipe))
    positions = np.array(batch["positions"])
    assert (positions[:, 1:] == 0).any(), "a document should start inside a row"
    preserve = views(batch, as_torch=False, position_mode="preserve")
    assert np.array_equal(preserve["positions"], positions[:, :-1])
    seq = views(batch, as_torch=False, position_mode="sequence", return_cu_seqlens=True,
                            flatten=True)
    assert np.array_equal(seq["positions"], np.tile(np.arange(L - 1), B))
    # cu_seqlens still follow the documents (the attention boundaries do not change).
    doc = views(batch, as_torch=False, return_cu_seqlens=True)
    assert np.array_equal(seq["cu_seqlens"], doc["cu_seqlens"])
    assert seq["cu_seqlens"].size > B + 1
    no_labels = views(batch, as_torch=False, return_labels=False,
                                  position_mode="sequence", dtype=torch.long)
    assert no_labels["positions"].dtype == np.int64
    assert np.array_equal(no_labels["positions"], np.tile(np.arange(L), (B, 1)))
    with pytest.raises(ValueError, match="position_mode"):
        views(batch, position_mode="document")
    pipe.close()


def test_position_mode_sequence_without_positions(corpus, daemon):
    ds = zephon.Dataset.from_path("web", str(corpus), fmt="megatron")
    ws = zephon.StaticMixtureWorkSource([ds], seed=1234, chunk_size=32)
    pipe = (zephon.Pipeline(ws).pack_flat(max_length=L, emit_positions=False).batch(B)
            .options(daemon=daemon.socket, canonical_replicas=1, max_open_batches=1))
    batch = next(iter(pipe))
    assert "positions" not in batch.keys()
    assert "positions" not in views(batch, as_torch=False)
    out = views(batch, as_torch=False, position_mode="sequence")
    assert np.array_equal(out["positions"], np.tile(np.arange(L - 1), (B, 1)))
    pipe.close()


def test_eos_mask_loss(eos_corpus, daemon):
    pipe = open_pipe(eos_corpus, daemon)
    it = iter(pipe)
    seen_eos = 0
    for _ in range(5):
        batch = next(it)
        tokens = np.array(batch["tokens"]).astype(np.int64)
        positions = np.array(batch["positions"])
        # numpy reference: label t (= token t+1) is ignored iff input t is EOS.
        want = tokens[:, 1:].copy()
        at_eos = tokens[:, :-1] == EOS
        want[at_eos] = -100
        seen_eos += int(at_eos.sum())
        out = views(batch, as_torch=False, eos_mask_loss=True, eos_token_id=EOS,
                                return_loss_mask=True, return_num_valid_tokens=True)
        assert np.array_equal(out["labels"], want)
        assert np.array_equal(out["loss_mask"], ~at_eos)
        assert out["num_valid_tokens"] == B * (L - 1) - int(at_eos.sum())
        assert not np.shares_memory(out["labels"], batch["tokens"])
        assert np.shares_memory(out["input_ids"], batch["tokens"])
        # Documents end with EOS, so inside a row the EOS-input labels are exactly
        # those whose target starts a document (mask_document_boundaries).
        assert np.array_equal(at_eos, positions[:, 1:] == 0)
        # Without eos_mask_loss the same labels are trained on.
        plain = views(batch, as_torch=False)
        assert np.array_equal(plain["labels"], tokens[:, 1:])
        # Torch output with dtype, ignore_index and flatten.
        t = views(batch, as_torch=True, dtype=torch.long, eos_mask_loss=True,
                              eos_token_id=EOS, ignore_index=-7, flatten=True)
        want7 = tokens[:, 1:].copy()
        want7[at_eos] = -7
        assert t["labels"].dtype == torch.int64
        assert torch.equal(t["labels"], torch.from_numpy(want7.reshape(-1)))
    assert seen_eos > 0
    batch = next(it)
    for bad in (None, "7", 7.0, True):
        with pytest.raises(ValueError, match="eos_token_id"):
            views(batch, eos_mask_loss=True, eos_token_id=bad)
    with pytest.raises(ValueError, match="return_labels"):
        views(batch, return_labels=False, eos_mask_loss=True, eos_token_id=EOS)
    # eos_token_id without eos_mask_loss changes nothing.
    assert np.array_equal(views(batch, as_torch=False, eos_token_id=EOS)["labels"],
                          batch["tokens"][:, 1:])
    pipe.close()


def test_rename_error_is_key_and_value_error(corpus, daemon):
    pipe = open_pipe(corpus, daemon)
    batch = next(iter(pipe))
    for exc in (KeyError, ValueError):
        with pytest.raises(exc, match="rename_fields names \\['nope'\\]"):
            views(batch, rename_fields={"nope": "x"})
    # A field this call does not return (no cu_seqlens asked) also raises.
    with pytest.raises(ValueError, match="cu_seqlens"):
        views(batch, rename_fields={"cu_seqlens": "cu"})
    out = views(batch, as_torch=False, rename_fields={"input_ids": "tokens"})
    assert set(out) == {"tokens", "labels", "positions", "ids"}
    pipe.close()
