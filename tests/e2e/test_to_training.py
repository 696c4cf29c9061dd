"""Batch.to_training against a real daemon: shapes, label shift, positions, cu_seqlens,
boundary masking, flatten, rename and zero-copy views."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import pipeline

L, B = 33, 2


def first_batches(corpus, daemon, n=3):
    pipe = pipeline(corpus, daemon.socket, max_length=L, microbatch=B,
                    canonical_replicas=1, max_open_batches=1)
    it = iter(pipe)
    return pipe, it


def segments_ok(cu, positions_flat, width):
    """Every [cu[i], cu[i+1]) is one run of consecutive positions starting at 0 (or at a
    row start), and cu covers every reset."""
    assert cu.dtype == np.int32 and cu[0] == 0 and cu[-1] == positions_flat.size
    assert np.all(np.diff(cu) > 0)
    for a, b in zip(cu[:-1], cu[1:]):
        seg = positions_flat[a:b]
        assert np.array_equal(seg, seg[0] + np.arange(b - a)), (a, b, seg)
        assert seg[0] == 0 or a % width == 0
    resets = set(np.flatnonzero(positions_flat == 0).tolist())
    assert resets <= set(cu.tolist())


def test_dtype_none_gives_views_with_shifted_labels(corpus, daemon):
    pipe, it = first_batches(corpus, daemon)
    batch = next(it)
    tokens, positions = batch["tokens"], batch["positions"]
    out = batch.to_training(return_labels=True, as_torch=False, dtype=None)
    assert set(out) == {"input_ids", "labels", "positions", "ids"}
    assert np.array_equal(out["input_ids"], tokens[:, :-1])
    assert np.array_equal(out["labels"], tokens[:, 1:])
    assert np.array_equal(out["positions"], positions[:, :-1])
    assert out["input_ids"].shape == (B, L - 1)
    for key, base in (("input_ids", tokens), ("labels", tokens), ("positions", positions)):
        assert np.shares_memory(out[key], base), key
    assert out["ids"] == batch.ids
    no_labels = batch.to_training(return_labels=False, as_torch=False, return_positions=False)
    assert set(no_labels) == {"input_ids", "ids"} and no_labels["input_ids"].shape == (B, L)
    pipe.close()


def test_cu_seqlens_masking_and_num_valid_tokens(corpus, daemon):
    pipe, it = first_batches(corpus, daemon)
    found_boundary = False
    for _ in range(6):
        batch = next(it)
        pos = np.array(batch["positions"])
        out = batch.to_training(as_torch=False, return_cu_seqlens=True, return_labels=True,
                                return_num_valid_tokens=True)
        segments_ok(out["cu_seqlens"], pos[:, :-1].reshape(-1), L - 1)
        assert out["num_valid_tokens"] == B * (L - 1)  # wrap packing: nothing masked
        masked = batch.to_training(as_torch=False, mask_document_boundaries=True, dtype=None,
                                   ignore_index=-7, return_num_valid_tokens=True,
                                   return_labels=True)
        boundary = pos[:, 1:] == 0
        found_boundary |= bool(boundary.any())
        assert np.all(masked["labels"][boundary] == -7)
        assert np.array_equal(masked["labels"][~boundary], batch["tokens"][:, 1:][~boundary])
        assert masked["num_valid_tokens"] == B * (L - 1) - int(boundary.sum())
        assert not np.shares_memory(masked["labels"], batch["tokens"])  # a copy
        assert np.shares_memory(masked["input_ids"], batch["tokens"])
    assert found_boundary, "the corpus should put document starts inside rows"
    pipe.close()


def test_flatten_rename_and_torch_zero_copy(corpus, daemon):
    pipe, it = first_batches(corpus, daemon)
    batch = next(it)
    tokens = batch["tokens"]
    flat = batch.to_training(as_torch=False, flatten=True, return_cu_seqlens=True,
                             return_labels=True)
    assert flat["input_ids"].shape == (B * (L - 1),)
    assert np.array_equal(flat["input_ids"], tokens[:, :-1].reshape(-1))
    assert np.array_equal(flat["labels"], tokens[:, 1:].reshape(-1))
    segments_ok(flat["cu_seqlens"], flat["positions"], L - 1)
    # Without labels the whole rows are contiguous: flattening stays a view.
    assert np.shares_memory(batch.to_training(return_labels=False, flatten=True, dtype=None,
                                              as_torch=False)["input_ids"], tokens)

    mega = batch.to_training(as_torch=True, rename_fields={"input_ids": "tokens"},
                             return_cu_seqlens=True, return_labels=True, dtype=None)
    assert set(mega) == {"tokens", "labels", "positions", "cu_seqlens", "ids"}
    assert isinstance(mega["tokens"], torch.Tensor)
    assert mega["cu_seqlens"].dtype == torch.int32
    assert torch.equal(mega["tokens"], torch.from_numpy(np.array(tokens[:, :-1])))
    start = tokens.__array_interface__["data"][0]
    end = start + tokens.nbytes
    for key in ("tokens", "labels"):
        assert start <= mega[key].data_ptr() < end, key  # inside the shared-memory slot
    assert mega["tokens"].data_ptr() == start
    assert mega["labels"].data_ptr() == start + tokens.itemsize
    with pytest.raises(KeyError, match="rename_fields"):
        batch.to_training(rename_fields={"nope": "x"})
    with pytest.raises(ValueError, match="needs return_labels"):
        batch.to_training(return_labels=False, return_num_valid_tokens=True)
    pipe.close()
