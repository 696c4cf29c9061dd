"""pack_flat's packing knobs (issue 16, upstream's names) against a real daemon:
max_sequences_per_bin, min_sequence_length and flush_strategy change the rows as
stated, show in explain(), and are checked in Python before attach."""
from __future__ import annotations

import numpy as np
import pytest

import zephon
from zephon import errors

from test_packing import B, L, padded_pipeline as knob_pipeline  # same corpus setup


def documents_per_row(batch) -> list[int]:
    """Segments of each row's real cells (positions restart at 0 per document)."""
    positions, valid = np.array(batch["positions"]), np.array(batch["valid_tokens"])
    return [int(np.sum(positions[r, :valid[r]] == 0)) for r in range(len(valid))]


def fill_rate(pipe, batches=30) -> float:
    valid = 0
    for _, batch in zip(range(batches), pipe):
        valid += int(np.array(batch["valid_tokens"]).sum())
    return valid / (batches * B * L)


@pytest.mark.parametrize("algorithm", ["best_fit", "best_fit_wrap"])
def test_max_sequences_per_bin_caps_the_documents_of_a_row(corpus, daemon, algorithm):
    capped = knob_pipeline(corpus, daemon.socket, algorithm, max_sequences_per_bin=2)
    assert "max_sequences_per_bin=2" in capped.explain()
    counts = [n for _, b in zip(range(30), capped) for n in documents_per_row(b)]
    capped.close()
    assert max(counts) <= 2 and 2 in counts
    free = knob_pipeline(corpus, daemon.socket, algorithm)
    assert max(n for _, b in zip(range(30), free) for n in documents_per_row(b)) > 2
    free.close()


def test_min_sequence_length_and_flush_strategy(corpus, daemon):
    # A bin whose room falls below a whole record is emitted after its first document:
    # one document per row, so the fill rate drops.
    eager = knob_pipeline(corpus, daemon.socket, min_sequence_length=L)
    assert "min_sequence_length=513" in eager.explain()
    assert all(n == 1 for _, b in zip(range(10), eager) for n in documents_per_row(b))
    eager.close()
    baseline = knob_pipeline(corpus, daemon.socket)
    fullest = knob_pipeline(corpus, daemon.socket, num_bins=2, flush_strategy="fullest")
    fifo = knob_pipeline(corpus, daemon.socket, num_bins=2, flush_strategy="fifo")
    assert "flush_strategy=fullest" in fullest.explain()
    rates = fill_rate(baseline), fill_rate(fullest), fill_rate(fifo)
    for p in (baseline, fullest, fifo):
        p.close()
    assert all(0 < r <= 1 for r in rates)
    assert rates[1] != rates[2], "the strategy picks other bins"


def test_knobs_are_checked_before_attach(corpus):
    ds = zephon.Dataset.from_path("web", str(corpus), fmt="megatron")
    base = zephon.Pipeline(zephon.StaticMixtureWorkSource([ds]))
    with pytest.raises(errors.InvalidOptionError, match="max_sequences_per_bin applies to"):
        base.pack_flat(L, max_sequences_per_bin=2)
    with pytest.raises(errors.InvalidOptionError, match="flush_strategy='lifo'"):
        base.pack_flat(L, algorithm="best_fit", pad_token_id=0, num_bins=2,
                       flush_strategy="lifo")
    with pytest.raises(errors.InvalidOptionError, match=r"min_sequence_length must be .*514"):
        base.pack_flat(L, algorithm="first_fit", pad_token_id=0, num_bins=2,
                       min_sequence_length=514)
    with pytest.raises(errors.InvalidOptionError, match="min_sequence_length applies"):
        base.pack_flat(L, algorithm="best_fit_wrap", pad_token_id=0, min_sequence_length=3)
