"""tokenize(field=["prompt", "completion"], loss_on=["completion"]) through zephond equals
HF tokenizers' ids of each field, concatenated (issue 16, SFT): for every tokenizer.json of
the reference, each packed document is the reference ids of its prompt followed by those
of its completion, and its loss mask is 0 over the prompt and 1 over the completion."""
import json

import numpy as np
import pytest

from conftest import CORPUS, TOKENIZERS, read_jsonl, run_reference, \
    skip_without_reference
import zephon

DOCS = 64  # a whole number of chunks (chunk_size 8): a pass ends at a full chunk


@pytest.mark.parametrize("name", sorted(TOKENIZERS))
def test_prompt_completion_ids_equal_hf_per_field(name, daemon, tmp_path):
    skip_without_reference()
    texts = [d["text"] for d in read_jsonl(CORPUS)][:DOCS]
    # Prompts and completions: pieces of the corpus (its Unicode, its whitespace).
    prompts = [t[:40 + i % 50] for i, t in enumerate(texts)]
    completions = [texts[(i + 1) % len(texts)][:30 + i % 70] for i in range(len(texts))]
    for path, field in ((tmp_path / "p.jsonl", prompts), (tmp_path / "c.jsonl", completions)):
        path.write_text("".join(json.dumps({"text": t}) + "\n" for t in field), encoding="utf-8")
    ref_p = [r["ids"] for r in run_reference(TOKENIZERS[name], tmp_path / "p.jsonl")]
    ref_c = [r["ids"] for r in run_reference(TOKENIZERS[name], tmp_path / "c.jsonl")]
    data = tmp_path / "pc.jsonl"
    data.write_text("".join(json.dumps({"prompt": p, "completion": c}) + "\n"
                            for p, c in zip(prompts, completions)), encoding="utf-8")
    longest = max(len(p) + len(c) for p, c in zip(ref_p, ref_c))
    ds = zephon.Dataset.from_path("pc", str(data), fmt="jsonl")
    pipe = (zephon.Pipeline(zephon.StaticMixtureWorkSource([ds], seed=9, chunk_size=8))
            .tokenize(TOKENIZERS[name], field=["prompt", "completion"], loss_on=["completion"],
                      special_tokens="none")
            .pack_flat(max_length=longest + 1, algorithm="first_fit", num_bins=1,
                       pad_token_id=0)
            .batch(1, drop_last=False)
            .options(daemon=daemon.socket, canonical_replicas=1))
    seen = set()
    for batch in pipe:
        tokens = np.array(batch["tokens"])[0]
        mask = np.array(batch["loss_mask"])[0]
        positions = np.array(batch["positions"])[0]
        valid = int(np.array(batch["valid_tokens"])[0])
        starts = list(np.flatnonzero(positions[:valid] == 0)) + [valid]
        docs = [sid.index for sid in batch.ids]
        assert len(docs) == len(starts) - 1  # first_fit keeps documents whole, in order
        for i, a, b in zip(docs, starts[:-1], starts[1:]):
            assert tokens[a:b].tolist() == ref_p[i] + ref_c[i], (name, i)
            assert mask[a:b].tolist() == [0] * len(ref_p[i]) + [1] * len(ref_c[i]), (name, i)
            seen.add(i)
        batch.close()
    pipe.close()
    assert seen == set(range(DOCS))
