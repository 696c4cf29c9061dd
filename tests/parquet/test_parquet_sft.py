"""SFT loss masks from a Parquet column (issue 16) through zephond, against files written
by DuckDB (write_sft_files.mjs): the mask column (0/1 values, or flat [start, end) spans)
gives exactly the tokens and loss_mask of the JSONL twin DuckDB reads back; a mask of
another length than its tokens fails naming the file, the row and both lengths; and
prompt/completion text columns tokenized with tokenize(field=[...], loss_on=[...]) give the
tokens and masks of the JSONL twin.

Needs `make setup-parquet` (DuckDB through npm); skips saying so otherwise."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "e2e"))
sys.path.insert(0, str(HERE.parents[1] / "client" / "python"))

import zephon  # noqa: E402
from zephon import errors  # noqa: E402
from zephond_process import Daemon  # noqa: E402
from duckdb_node import require_duckdb, run_node  # noqa: E402


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    require_duckdb()
    out = tmp_path_factory.mktemp("pq-sft")
    run_node("write_sft_files.mjs", str(out))
    return out


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    d = Daemon(tmp_path_factory.mktemp("pq-sft-daemon"), peer=False)
    yield d
    d.stop()


def batches(ds, daemon, n=12) -> list[tuple[list, list]]:
    ws = zephon.StaticMixtureWorkSource([ds], seed=5, chunk_size=16)
    pipe = (zephon.Pipeline(ws).pack_flat(41, algorithm="best_fit", num_bins=4, pad_token_id=0)
            .batch(2).options(daemon=daemon.socket, canonical_replicas=1))
    out = []
    for batch in pipe:
        out.append((np.array(batch["tokens"]).tolist(), np.array(batch["loss_mask"]).tolist()))
        batch.close()
        if len(out) == n:
            break
    pipe.close()
    return out


def test_mask_column_gives_the_batches_of_its_jsonl_twin(data, daemon):
    values = zephon.Dataset("d", str(data / "sft"), fmt="parquet", field="input_ids",
                            loss_mask_field="loss_mask")
    spans = zephon.Dataset("d", str(data / "sft"), fmt="parquet", field="input_ids",
                           loss_mask_field="spans", loss_mask_format="spans")
    twin = zephon.Dataset("d", str(data / "sft-jsonl"), fmt="jsonl", field="input_ids",
                          loss_mask_field="loss_mask")
    want = batches(twin, daemon)
    assert any(0 in mask for _, rows in want for mask in [sum(rows, [])])
    assert batches(values, daemon) == want
    assert batches(spans, daemon) == want


def test_mask_length_mismatch_names_file_row_and_lengths(data, daemon):
    bad = zephon.Dataset("bad", str(data / "bad"), fmt="parquet", field="input_ids",
                         loss_mask_field="loss_mask")
    ws = zephon.StaticMixtureWorkSource([bad], seed=5, chunk_size=16)
    pipe = (zephon.Pipeline(ws).pack_flat(41, algorithm="best_fit", num_bins=4, pad_token_id=0)
            .batch(2).options(daemon=daemon.socket, canonical_replicas=1))
    with pytest.raises(errors.ZephonError) as info:
        pipe.attach()
    pipe.close()
    message = str(info.value)
    assert "part-0.parquet" in message and "row 0" in message, message
    assert "2 values" in message and "3 tokens" in message, message


def test_prompt_completion_columns_tokenize_as_their_jsonl_twin(data, daemon, tmp_path):
    from test_tokenize_pipeline import tiny_tokenizer_json
    from twin_batches import prompt_completion_batches
    tok = tmp_path / "tokenizer.json"
    tok.write_text(tiny_tokenizer_json(), encoding="utf-8")

    def sft(ds):
        return prompt_completion_batches(ds, daemon.socket, str(tok), seed=5)

    want = sft(zephon.Dataset("pc", str(data / "pc-jsonl"), fmt="jsonl"))
    assert want and any(0 in sum(m, []) and 1 in sum(m, []) for _, m in want)
    # The null completions are skipped (on_null="skip", the default): the same records.
    assert sft(zephon.Dataset("pc", str(data / "pc"), fmt="parquet")) == want
