"""A spawned process's side of test_in_memory_datasets: iterates a pickled in-memory
Dataset through its own Pipeline and returns the decoded documents."""
from __future__ import annotations


def decoded_documents(ds, socket: str) -> list[str]:
    import numpy as np
    import zephon
    p = (zephon.Pipeline(zephon.StaticMixtureWorkSource([ds], seed=0, chunk_size=4))
         .tokenize(tokenizer_id="__fallback__", special_tokens="none")
         .pack_flat(64, algorithm="first_fit", num_bins=1, pad_token_id=0)
         .batch(1, drop_last=False).options(daemon=socket, canonical_replicas=1))
    out = []
    for batch in p:
        valid = int(np.array(batch["valid_tokens"])[0])
        ids = np.array(batch["tokens"])[0][:valid]
        out.append(bytes(int(t) - 3 for t in ids).decode("utf-8"))
    p.close()
    return out
