"""Token-weighted mixtures through the daemon (StaticMixtureWorkSource(weight_by=...)):
the value is validated, the delivered batches' sample ids hold the token shares asked
for, explain shows the estimates, and a checkpoint resumes the same allocation."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest

import zephon

SHORT, LONG = 8, 200  # Tokens per document of each dataset.


@pytest.fixture
def short_and_long(tmp_path):
    zephon.write_megatron_dataset(tmp_path / "short", [np.full(SHORT, i % 900 + 1)
                                                       for i in range(2000)])
    zephon.write_megatron_dataset(tmp_path / "long", [np.full(LONG, i + 1) for i in range(80)])
    return tmp_path


def make_pipe(folder, socket, weight_by, **options):
    short = zephon.Dataset.from_path("short", str(folder / "short"), fmt="megatron")
    long = zephon.Dataset.from_path("long", str(folder / "long"), fmt="megatron")
    # "stop": the stream ends at the first exhausted dataset, so no sample repeats and
    # the delivered ids are distinct draws.
    ws = zephon.StaticMixtureWorkSource([short, long], mixture={"short": 3, "long": 1},
                                        seed=5, chunk_size=76, exhausted_policy="stop",
                                        weight_by=weight_by)
    return (zephon.Pipeline(ws).pack_flat(max_length=129).batch(4)
            .options(daemon=socket, **options))


def shares(pipe) -> tuple[float, float]:
    """(share of samples, share of tokens) of dataset "short" over every delivered batch."""
    ids = {(i.dataset, i.shard, i.index) for b in pipe for i in b.ids}
    n_short = sum(1 for d, _, _ in ids if d == 0)
    n_long = len(ids) - n_short
    return (n_short / len(ids), n_short * SHORT / (n_short * SHORT + n_long * LONG))


def test_weight_by_tokens_gives_token_shares(daemon, short_and_long):
    by_tokens = make_pipe(short_and_long, daemon.socket, "tokens", run_id="tokens")
    text = by_tokens.explain()
    assert "tokens/sample 8," in text and "tokens/sample 200," in text, text
    assert "weight_by=tokens" in text, text
    sample_share, token_share = shares(by_tokens)
    by_tokens.close()
    # 3 : 1 in tokens is 3/8 : 1/200 = 75 : 1 in samples (a tail batch is dropped).
    assert token_share == pytest.approx(0.75, abs=0.02)
    assert sample_share == pytest.approx(75 / 76, abs=0.005)
    by_samples = make_pipe(short_and_long, daemon.socket, "samples", run_id="samples")
    assert "weight_by=tokens" not in by_samples.explain()
    sample_share, token_share = shares(by_samples)
    by_samples.close()
    assert sample_share == pytest.approx(0.75, abs=0.02)
    assert token_share < 0.15  # 3 * 8 / (3 * 8 + 200) = 0.107


def test_weight_by_is_validated_naming_the_choices(short_and_long):
    with pytest.raises(ValueError, match=r"weight_by='bytes' is not supported; use one of "
                                         r"samples, tokens"):
        make_pipe(short_and_long, None, "bytes")


def test_a_token_weighted_run_resumes_the_same_allocation(daemon, short_and_long):
    def digests(pipe, n):
        it = iter(pipe)
        return [(hashlib.sha256(b["tokens"].tobytes()).hexdigest(), tuple(b.ids))
                for b in (next(it) for _ in range(n))]

    first = make_pipe(short_and_long, daemon.socket, "tokens", run_id="resume")
    digests(first, 6)
    state = first.checkpoint()
    after = digests(first, 8)
    first.close()
    resumed = make_pipe(short_and_long, daemon.socket, "tokens", run_id="resume").restore(state)
    assert digests(resumed, 8) == after
    resumed.close()
    # The checkpoint belongs to the token-weighted spec: the same pipeline by samples is
    # another spec hash.
    other = make_pipe(short_and_long, daemon.socket, "samples", run_id="resume").restore(state)
    with pytest.raises(zephon.ZephonError, match=r"spec hash"):
        other.attach()
    other.close()
