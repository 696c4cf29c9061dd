"""pack_sequences (issue 16) against a real daemon: the records are pack_flat's, published
with their segment boundaries (``segment_lengths``) and read as upstream's envelopes
(``Batch.packed_samples``); whole documents with first_fit/best_fit, slices with
wrap/best_fit_wrap; resumable like every other chain; to_training refuses them."""
from __future__ import annotations

import numpy as np
import pytest

import zephon
from zephon import errors
from zephon.corpus import synthetic_documents

from conftest import NUM_DOCS

L, B = 513, 4  # documents are 20..400 tokens: every one fits a record whole


def documents() -> list[np.ndarray]:
    """The corpus fixture's documents: shard s's index i is documents()[s * 1000 + i]."""
    return [np.asarray(d) for d in synthetic_documents(NUM_DOCS, seed=11)]


def packed(corpus, socket, packer, algorithm, **pack):
    ds = zephon.Dataset.from_path("web", str(corpus), fmt="megatron")
    ws = zephon.StaticMixtureWorkSource([ds], seed=7, chunk_size=32)
    if algorithm in ("first_fit", "best_fit"):
        pack.setdefault("num_bins", 8)
    if algorithm != "wrap":
        pack.setdefault("pad_token_id", 0)
    pipe = getattr(zephon.Pipeline(ws), packer)(L, algorithm=algorithm, **pack)
    return pipe.batch(B).options(daemon=socket, canonical_replicas=1)


def take(pipe, n):
    """n batches as (tokens, valid_tokens or None, segment_lengths or None, ids, envelopes)."""
    out = []
    for _, b in zip(range(n), pipe):
        seg = np.array(b["segment_lengths"]) if "segment_lengths" in b.keys() else None
        envelopes = ([[{k: np.array(v) for k, v in s.items()} for s in row]
                      for row in b.packed_samples] if seg is not None else None)
        valid = np.array(b["valid_tokens"]) if "valid_tokens" in b.keys() else None
        out.append((np.array(b["tokens"]), valid, seg, b.ids, envelopes))
    return out


@pytest.mark.parametrize("algorithm", ["first_fit", "best_fit", "wrap", "best_fit_wrap"])
def test_records_are_pack_flats_with_their_segment_boundaries(corpus, daemon, algorithm):
    flat = packed(corpus, daemon.socket, "pack_flat", algorithm)
    seqs = packed(corpus, daemon.socket, "pack_sequences", algorithm)
    text = seqs.explain()
    assert f"pack_sequences(max_length={L}, {algorithm}" in text
    reference = take(flat, 8)
    # pack_flat's positions give its segments (they restart at 0 per piece).
    flat_positions = []
    for _, b in zip(range(8), packed(corpus, daemon.socket, "pack_flat", algorithm)):
        flat_positions.append(np.array(b["positions"]))
    got = take(seqs, 8)
    flat.close()
    seqs.close()
    docs = documents()
    widths = set()
    for (tokens, valid, _, ids, _), positions, (s_tokens, s_valid, seg, s_ids, env) in zip(
            reference, flat_positions, got):
        assert np.array_equal(tokens, s_tokens), "the same records as pack_flat"
        assert ids == s_ids
        assert seg.dtype == np.int32 and seg.shape[0] == B
        widths.add(seg.shape[1])
        assert seg.shape[1] == max(int(np.count_nonzero(r)) for r in seg)
        pieces = []
        for r in range(B):
            real = int(valid[r]) if valid is not None else L
            lengths = [int(n) for n in seg[r] if n]
            assert sum(lengths) == real
            assert np.all(seg[r][len(lengths):] == 0), "zeros only after the segments"
            # Each segment is exactly a run of pack_flat positions 0, 1, ..., n - 1.
            starts = np.flatnonzero(positions[r, :real] == 0).tolist()
            assert starts == np.cumsum([0] + lengths[:-1]).tolist()
            # The envelope: views of the row cut at the boundaries.
            assert [len(s["tokens"]) for s in env[r]] == lengths
            joined = np.concatenate([s["tokens"] for s in env[r]])
            assert np.array_equal(joined, tokens[r, :real])
            assert set(env[r][0]) == {"tokens"}, "no positions unless emit_positions"
            pieces.extend(s["tokens"] for s in env[r])
        if algorithm in ("first_fit", "best_fit"):
            # Whole documents, in the order their ids are listed.
            assert len(pieces) == len(s_ids)
            for piece, sid in zip(pieces, s_ids):
                assert np.array_equal(piece, docs[sid.shard * 1000 + sid.index])
    if algorithm == "wrap":
        assert all(v is None for _, v, _, _, _ in got), "wrap never pads"
    assert max(widths) > 1


def test_resume_restores_segments_and_dp_degrees_agree(corpus, make_daemon, tmp_path):
    """A checkpoint mid-stream resumes with the same records and boundaries, and the
    per-step sample sets of dp_degree 1 and 2 are equal (the engine's guarantees hold
    for pack_sequences as for pack_flat)."""
    d = make_daemon("a")

    def pipe(**options):
        ds = zephon.Dataset.from_path("web", str(corpus), fmt="megatron")
        ws = zephon.StaticMixtureWorkSource([ds], seed=3, chunk_size=16)
        return (zephon.Pipeline(ws).shuffle(64, seed=5)
                .pack_sequences(L, num_bins=4, max_sequences_per_bin=6)
                .batch(B).options(daemon=d.socket, canonical_replicas=2, **options))

    first = pipe(dp_degree=1, dp_group_id=0)
    it = iter(first)
    for _ in range(4):  # a whole number of lane rounds (C=2)
        next(it)
    state = first.checkpoint()
    expected = [(np.array(b["tokens"]), np.array(b["segment_lengths"]))
                for _, b in zip(range(6), it)]
    first.close()
    resumed = pipe(dp_degree=1, dp_group_id=0).restore(state)
    got = [(np.array(b["tokens"]), np.array(b["segment_lengths"]))
           for _, b in zip(range(6), resumed)]
    resumed.close()
    assert len(got) == 6
    for (t, s), (t2, s2) in zip(expected, got):
        assert np.array_equal(t, t2) and np.array_equal(s, s2)
        assert s.shape[1] <= 6, "max_sequences_per_bin bounds the width"
    # dp_degree 2: each step's two batches hold the samples dp_degree 1 gives in two.
    one = pipe(dp_degree=1, dp_group_id=0)
    single = [sorted(b.ids) for _, b in zip(range(8), one)]
    one.close()
    groups = [pipe(dp_degree=2, dp_group_id=g, world_size=2, global_rank=g, run_id="seqs",
                   aggregate_dir=str(tmp_path / "agg")) for g in (0, 1)]
    per_group = [[sorted(b.ids) for _, b in zip(range(4), p)] for p in groups]
    for p in groups:
        p.close()
    for step in range(4):
        assert sorted(per_group[0][step] + per_group[1][step]) == \
            sorted(single[2 * step] + single[2 * step + 1])


def test_to_training_refuses_and_pack_flat_batches_have_no_segments(corpus, daemon):
    seqs = packed(corpus, daemon.socket, "pack_sequences", "best_fit")
    batch = next(iter(seqs))
    with pytest.raises(ValueError, match="pack_sequences.*batch.packed_samples"):
        batch.to_training()
    assert "positions" not in batch.keys()
    seqs.close()
    flat = packed(corpus, daemon.socket, "pack_flat", "best_fit")
    batch = next(iter(flat))
    with pytest.raises(KeyError, match="pack_sequences"):
        batch.packed_samples
    assert "segment_lengths" not in batch.keys()
    flat.close()


def test_options_are_checked_before_attach(corpus):
    ds = zephon.Dataset.from_path("web", str(corpus), fmt="megatron")

    def fresh():  # builders change the Pipeline they are called on
        return zephon.Pipeline(zephon.StaticMixtureWorkSource([ds]))

    with pytest.raises(errors.InvalidOptionError,
                       match=r"Pipeline.pack_sequences: algorithm 'first_fit' needs num_bins"):
        fresh().pack_sequences(L)
    with pytest.raises(errors.InvalidOptionError, match="'wrap' never pads"):
        fresh().pack_sequences(L, algorithm="wrap", pad_token_id=3)
    with pytest.raises(errors.InvalidOptionError, match="already packs with pack_flat"):
        fresh().pack_flat(L).pack_sequences(L, num_bins=2)
    with pytest.raises(errors.InvalidOptionError, match=r"call pack_sequences\(\) before batch"):
        fresh().batch(2).pack_sequences(L, num_bins=2)
    # A shuffle after pack_sequences shuffles its records, as after pack_flat.
    fresh().pack_sequences(L, num_bins=2).shuffle(8).batch(2)


def test_zephond_refuses_a_second_packer(corpus, daemon):
    """The daemon's own grammar check (a client that bypasses the Python builder)."""
    ds = zephon.Dataset.from_path("web", str(corpus), fmt="megatron")
    pipe = (zephon.Pipeline(zephon.StaticMixtureWorkSource([ds]))
            .pack_sequences(L, num_bins=2).batch(2).options(daemon=daemon.socket))
    pipe._operators.insert(1, {"pack_flat": {"max_length": str(L)}})
    with pytest.raises(errors.ZephonError, match=r"operators\[1\]: expected batch"):
        pipe.attach()
    pipe.close()


def test_readme_pack_sequences_example_runs(tmp_path):
    from readme_blocks import run_readme_block
    out = run_readme_block(".pack_sequences(max_length=129", tmp_path)
    counts = eval(out.split("segments per row:")[1])
    assert len(counts) == 4 and all(1 <= n <= 8 for n in counts) and max(counts) > 1
