"""tokenize -> pack_flat through zephond equals HF tokenizers' ids on the corpus, for every
tokenizer.json of the reference (issue 14: exactness through the pipeline too). Each packed
record must be a run of the concatenated reference ids of its batch's documents, in order
(pack_flat wraps documents across records), and the batches cover the corpus."""

import pytest

from conftest import CORPUS, TOKENIZERS, skip_without_reference
import zephon


@pytest.mark.parametrize("name", sorted(TOKENIZERS))
def test_tokenize_pack_flat_equals_hf_on_the_corpus(name, reference, daemon):
    skip_without_reference()
    ref = [r["ids"] for r in reference(name)]
    ds = zephon.Dataset.from_path("corpus", str(CORPUS), fmt="jsonl")
    pipe = (zephon.Pipeline(zephon.StaticMixtureWorkSource([ds], seed=9, chunk_size=8))
            .tokenize(TOKENIZERS[name], special_tokens="none")
            .pack_flat(max_length=65).batch(2, drop_last=False)
            .options(daemon=daemon.socket))
    seen = set()
    records = 0
    for batch in pipe:
        stream = [t for sid in batch.ids for t in ref[sid.index]]
        seen.update(sid.index for sid in batch.ids)
        for row in batch["tokens"].tolist():
            records += 1
            assert any(stream[s:s + len(row)] == row
                       for s in range(len(stream) - len(row) + 1)), (
                name, [sid.index for sid in batch.ids], row[:16])
        batch.close()
    pipe.close()
    assert records > 0
    # Documents too short to reach a record before a flush may be dropped; the rest are
    # all there.
    assert len(seen) >= 0.9 * sum(1 for ids in ref if ids), (len(seen), len(ref))
