"""SFT loss masks end to end (issue 16): a mask from a JSONL field (0/1 values or
[start, end) spans) and from prompt/completion fields (tokenize(loss_on=...)) flows
through zephond's token cache, packing and batching into the "loss_mask" tensor, and
Batch.to_training applies it to the labels (label-aligned). Errors name the file, the
record and both lengths."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import zephon
from zephon import errors

ROOT = Path(__file__).resolve().parents[2]
L, B, PAD = 33, 4, 0


def doc(i: int) -> tuple[list[int], list[int]]:
    """Document i: 3..20 tokens (>= 1, so pad cells are recognisable), and its mask."""
    n = 3 + (i * 7) % 18
    ids = [1 + (i * 31 + k) % 500 for k in range(n)]
    prompt = 1 + i % (n - 1)  # a prompt of >= 1 tokens, then the completion
    return ids, [0] * prompt + [1] * (n - prompt)


def write_sft(path: Path, n: int = 120, spans: bool = False) -> dict:
    """JSONL of token ids with masks; returns {tuple(ids): {tuple(mask), ...}} (records
    with equal ids may differ in their masks)."""
    want = {}
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            ids, mask = doc(i)
            record = {"input_ids": ids}
            if spans:
                record["spans"] = [[mask.index(1), len(ids)]]
            else:
                record["loss_mask"] = mask
            f.write(json.dumps(record) + "\n")
            want.setdefault(tuple(ids), set()).add(tuple(mask))
    return want


def sft_pipeline(datasets, socket, **pack) -> zephon.Pipeline:
    ws = zephon.StaticMixtureWorkSource(datasets, seed=3, chunk_size=16)
    return (zephon.Pipeline(ws).pack_flat(L, algorithm="best_fit", pad_token_id=PAD,
                                          num_bins=4, **pack)
            .batch(B).options(daemon=socket, canonical_replicas=1))


def segments(row_positions: np.ndarray):
    """[start, end) of each segment of a row (positions restart at 0)."""
    starts = list(np.flatnonzero(row_positions == 0)) + [row_positions.size]
    return list(zip(starts[:-1], starts[1:]))


def check_batches(pipe, want, *, unmasked=None, steps=8) -> int:
    """Every document segment's mask is its record's; padding is 0; to_training masks
    exactly the labels whose target cell is masked. Returns the masked cells seen."""
    masked_seen = 0
    for step, batch in enumerate(pipe):
        tokens = np.array(batch["tokens"])
        positions = np.array(batch["positions"])
        valid = np.array(batch["valid_tokens"])
        mask = np.array(batch["loss_mask"])
        assert mask.dtype == np.uint8 and mask.shape == tokens.shape
        for r in range(tokens.shape[0]):
            assert np.all(mask[r, valid[r]:] == 0), "padding is masked"
            for a, b in segments(positions[r, :valid[r]]):
                key = tuple(tokens[r, a:b].tolist())
                if unmasked is not None and key in unmasked:
                    assert np.all(mask[r, a:b] == 1), "an unmasked dataset is all ones"
                    continue
                assert key in want, "best_fit places whole documents"
                assert tuple(mask[r, a:b].tolist()) in want[key]
        masked_seen += int((mask == 0).sum())
        out = batch.to_training(as_torch=False, ignore_index=-100, return_loss_mask=True,
                                return_labels=True, return_num_valid_tokens=True)
        labels, keep = out["labels"], out["loss_mask"]
        assert keep.shape == labels.shape == (tokens.shape[0], L - 1) and keep.dtype == bool
        # Label-aligned: labels[:, t] (= tokens[:, t + 1]) is kept iff mask[:, t + 1].
        assert np.array_equal(keep, mask[:, 1:] == 1)
        assert np.all(labels[~keep] == -100)
        assert np.array_equal(labels[keep], tokens[:, 1:][keep])
        assert out["num_valid_tokens"] == int(keep.sum())
        plain = batch.to_training(as_torch=False, return_labels=False, return_loss_mask=True)
        assert np.array_equal(plain["loss_mask"], mask == 1)
        # With document boundaries masked too, the returned mask is exactly the labels kept.
        bounded = batch.to_training(as_torch=False, ignore_index=-100, return_loss_mask=True,
                                    return_labels=True, mask_document_boundaries=True)
        assert np.array_equal(bounded["loss_mask"], bounded["labels"] != -100)
        batch.close()
        if step + 1 == steps:
            break
    return masked_seen


def test_jsonl_loss_mask_values_reach_the_batch_and_the_labels(daemon, tmp_path):
    want = write_sft(tmp_path / "sft.jsonl")
    ds = zephon.Dataset("sft", str(tmp_path / "sft.jsonl"), fmt="jsonl",
                        loss_mask_field="loss_mask")
    pipe = sft_pipeline([ds], daemon.socket)
    masked = check_batches(pipe, want)
    assert masked > 0
    text = pipe.explain()
    status = zephon.daemon_status(daemon.socket)["instances"][0]
    pipe.close()
    assert "loss mask: dataset 'sft': field 'loss_mask' (values), in the token cache" in text
    line = re.search(r"loss mask lane 0 \(written so far\): tokens=(\d+) masked=(\d+) "
                     r"\((\S+)%\)", text)
    assert line, text
    lane = status["loss_mask"][0]
    tokens, masked_tokens = int(lane["tokens"]), int(lane["masked_tokens"])
    assert 0 < masked_tokens < tokens
    # The status counts real cells only: padding (0 in the mask) is not "masked".
    packing = status["packing"][0]
    assert tokens <= int(packing["tokens"])


def test_pack_sequences_segments_carry_their_documents_masks(daemon, tmp_path):
    """pack_sequences keeps each document whole (best_fit) with its own mask: every
    envelope segment is one record's ids and mask, as written."""
    want = write_sft(tmp_path / "sft.jsonl")
    ds = zephon.Dataset("sft", str(tmp_path / "sft.jsonl"), fmt="jsonl",
                        loss_mask_field="loss_mask")
    ws = zephon.StaticMixtureWorkSource([ds], seed=3, chunk_size=16)
    pipe = (zephon.Pipeline(ws).pack_sequences(L, algorithm="best_fit", num_bins=4)
            .batch(B).options(daemon=daemon.socket, canonical_replicas=1))
    seen = 0
    for _, batch in zip(range(8), pipe):
        for row in batch.packed_samples:
            for segment in row:
                assert set(segment) == {"tokens", "loss_mask"}
                ids = tuple(int(t) for t in segment["tokens"])
                assert tuple(int(m) for m in segment["loss_mask"]) in want[ids]
                seen += 1
    pipe.close()
    assert seen > 8 * B


def test_loss_mask_figures_reach_metrics(tmp_path):
    import urllib.request

    from conftest import Daemon

    want = write_sft(tmp_path / "sft.jsonl")
    d = Daemon(tmp_path / "d", ["--metrics-address", "127.0.0.1:0"])
    try:
        ds = zephon.Dataset("sft", str(tmp_path / "sft.jsonl"), fmt="jsonl",
                            loss_mask_field="loss_mask")
        pipe = sft_pipeline([ds], d.socket).options(run_id="sft-run")
        check_batches(pipe, want, steps=3)
        address = zephon.daemon_status(d.socket)["metrics_address"]
        with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as r:
            text = r.read().decode()
        samples = {}
        for name in ("zephon_loss_mask_tokens_total", "zephon_loss_mask_masked_tokens_total",
                     "zephon_loss_mask_masked_ratio"):
            m = re.search(rf'^{name}{{[^}}]*run="sft-run"[^}}]*lane="0"[^}}]*}} (\S+)$', text,
                          re.M)
            assert m, f"no {name} for lane 0 in:\n{text}"
            samples[name] = float(m.group(1))
        tokens = samples["zephon_loss_mask_tokens_total"]
        masked = samples["zephon_loss_mask_masked_tokens_total"]
        assert 0 < masked < tokens
        assert samples["zephon_loss_mask_masked_ratio"] == pytest.approx(masked / tokens)
        pipe.close()
    finally:
        rc = d.stop()
    assert rc == 0, d.log.read_text()


def test_jsonl_loss_mask_spans(daemon, tmp_path):
    want = write_sft(tmp_path / "sft.jsonl", spans=True)
    ds = zephon.Dataset("sft", str(tmp_path / "sft.jsonl"), fmt="jsonl",
                        loss_mask_field="spans", loss_mask_format="spans")
    pipe = sft_pipeline([ds], daemon.socket)
    assert check_batches(pipe, want) > 0
    pipe.close()


def test_unmasked_datasets_of_a_masked_pipeline_are_all_ones(daemon, tmp_path):
    want = write_sft(tmp_path / "sft.jsonl")
    with open(tmp_path / "plain.jsonl", "w", encoding="utf-8") as f:
        plain = set()
        for i in range(60):
            ids = [600 + (i * 13 + k) % 300 for k in range(2 + i % 9)]
            plain.add(tuple(ids))
            f.write(json.dumps({"input_ids": ids}) + "\n")
    pipe = sft_pipeline([zephon.Dataset("sft", str(tmp_path / "sft.jsonl"), fmt="jsonl",
                                        loss_mask_field="loss_mask"),
                         zephon.Dataset("plain", str(tmp_path / "plain.jsonl"), fmt="jsonl")],
                        daemon.socket)
    check_batches(pipe, want, unmasked=plain)
    text = pipe.explain()
    pipe.close()
    assert "loss mask: dataset 'plain': none (every token trained on)" in text, text


def test_a_pipeline_without_masks_has_no_loss_mask_tensor(daemon, tmp_path):
    write_sft(tmp_path / "sft.jsonl")
    pipe = sft_pipeline([zephon.Dataset("sft", str(tmp_path / "sft.jsonl"), fmt="jsonl")],
                        daemon.socket)
    batch = next(iter(pipe))
    assert "loss_mask" not in batch.keys()
    out = batch.to_training(as_torch=False, return_loss_mask=True, return_labels=True)
    valid = np.array(batch["valid_tokens"])
    assert np.array_equal(out["loss_mask"], np.arange(1, L)[None, :] < valid[:, None])
    batch.close()
    pipe.close()


def test_mask_length_mismatch_names_file_record_and_both_lengths(daemon, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"input_ids": [1, 2], "loss_mask": [0, 1]}) + "\n" +
                    json.dumps({"input_ids": [1, 2, 3], "loss_mask": [0, 1]}) + "\n")
    pipe = sft_pipeline([zephon.Dataset("bad", str(path), fmt="jsonl",
                                        loss_mask_field="loss_mask")], daemon.socket)
    with pytest.raises(errors.ZephonError) as info:
        pipe.attach()
    pipe.close()
    message = str(info.value)
    assert str(path) in message and "line 2" in message, message
    assert "2 values" in message and "3 tokens" in message, message


def test_loss_mask_options_are_checked_before_attach(tmp_path):
    with pytest.raises(errors.InvalidOptionError, match="loss_mask_format"):
        zephon.Dataset("d", str(tmp_path), fmt="jsonl", loss_mask_field="m",
                       loss_mask_format="bits")
    with pytest.raises(errors.InvalidOptionError, match="needs loss_mask_field"):
        zephon.Dataset("d", str(tmp_path), fmt="jsonl", loss_mask_format="spans")
    with pytest.raises(errors.InvalidOptionError, match="applies to JSONL, Parquet and MDS"):
        zephon.Dataset("d", str(tmp_path), fmt="megatron", loss_mask_field="m")
    spec = zephon.Dataset("d", str(tmp_path), fmt="jsonl").to_spec()
    assert "loss_mask_field" not in spec and "loss_mask_format" not in spec


# ----- prompt/completion ---------------------------------------------------------------

def tiny_tokenizer(tmp_path: Path) -> Path:
    header = (ROOT / "tokenizer" / "tiny_tokenizer_testing.h").read_text(encoding="utf-8")
    path = tmp_path / "tok" / "tokenizer.json"
    path.parent.mkdir()
    path.write_text(re.search(r'R"json\((.*)\)json"', header, re.S).group(1), encoding="utf-8")
    return path


def test_prompt_completion_masks_the_prompt(daemon, tmp_path):
    tok = tiny_tokenizer(tmp_path)
    ref = zephon.Tokenizer(str(tok))
    records, want = [], {}
    for i in range(80):
        prompt = " ".join(["ab", "a", "b"][(i + k) % 3] for k in range(1 + i % 5))
        completion = " ".join(["b", "ab"][(i + k) % 2] for k in range(1 + i % 4))
        records.append({"prompt": prompt, "completion": completion})
        p = ref.encode(prompt, special_tokens="bos")
        c = ref.encode(completion, special_tokens="eos")
        want.setdefault(tuple(p + c), set()).add(tuple([0] * len(p) + [1] * len(c)))
    data = tmp_path / "pc.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    ws = zephon.StaticMixtureWorkSource([zephon.Dataset("pc", str(data), fmt="jsonl")],
                                        seed=3, chunk_size=16)
    pipe = (zephon.Pipeline(ws)
            .tokenize(str(tok), field=["prompt", "completion"], loss_on=["completion"])
            .pack_flat(L, algorithm="best_fit", pad_token_id=PAD, num_bins=4)
            .batch(B).options(daemon=daemon.socket, canonical_replicas=1))
    assert check_batches(pipe, want) > 0
    text = pipe.explain()
    pipe.close()
    assert "fields=[prompt, completion]" in text and "loss_on=[completion]" in text, text
    assert ("loss mask: dataset 'pc': tokenize loss_on=[completion] of "
            "fields=[prompt, completion], in the token cache") in text, text


def test_loss_on_must_name_fields_that_are_tokenized(tmp_path):
    ws = zephon.StaticMixtureWorkSource([zephon.Dataset("pc", str(tmp_path), fmt="jsonl")])
    tok = tiny_tokenizer(tmp_path)
    with pytest.raises(errors.InvalidOptionError, match=r"loss_on names \['answer'\]"):
        zephon.Pipeline(ws).tokenize(str(tok), field=["prompt", "completion"],
                                     loss_on=["answer"])
    with pytest.raises(errors.InvalidOptionError, match="needs field to be a list"):
        zephon.Pipeline(ws).tokenize(str(tok), field="text", loss_on=["text"])
    with pytest.raises(errors.InvalidOptionError, match="tokenizer_default"):
        zephon.Pipeline(ws).tokenize(str(tok), field=["a", "b"], loss_on=["b"],
                                     special_tokens="tokenizer_default")


# ----- the SFT example and the README's SFT section ------------------------------------

def test_sft_example_masks_prompts(daemon):
    import subprocess
    import sys

    env = {"PYTHONPATH": str(ROOT / "client" / "python"), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "sft.py"), "--socket",
                          daemon.socket, "--records", "300", "--batches", "12"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert "SFT EXAMPLE PASSED" in lines
    summary = json.loads(lines[-1])
    assert summary["masks_ok"] and summary["batches"] == 12
    assert 0 < summary["trained_labels"] < summary["labels"]
    # The rows shown mark the masked prompt tokens in brackets.
    assert any(line.startswith("  batch 0 row 0: [1]") for line in lines), out.stdout
    assert any("loss mask lane 0 (written so far)" in line for line in lines), out.stdout


def test_readme_sft_example_runs(tmp_path):
    from readme_blocks import run_readme_block

    stdout = run_readme_block("loss_mask_field", tmp_path)
    lines = stdout.splitlines()
    assert lines[0].startswith("0 ") and "trained labels of 256" in lines[0], stdout
    assert "loss mask lane 0 (written so far)" in lines[-1], stdout


# ----- the C ABI (what C++ consumers read) ----------------------------------------------

C_READER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "client/c_api.h"

/* Attaches with the request JSON in argv[2], reads one batch and prints its
 * "loss_mask" tensor found by name: dtype, shape, then every byte. */
int main(int argc, char** argv) {
  FILE* f = fopen(argv[2], "rb");
  static char request[1 << 20];
  size_t n = fread(request, 1, sizeof(request) - 1, f);
  request[n] = 0;
  fclose(f);
  zephon_reader* reader = NULL;
  char* reply = NULL;
  char* error = NULL;
  if (zephon_attach(argv[1], NULL, request, 60, &reader, &reply, &error) != 0) {
    fprintf(stderr, "attach: %s\n", error);
    return 1;
  }
  zephon_batch batch;
  memset(&batch, 0, sizeof(batch));
  batch.struct_size = sizeof(batch);
  if (zephon_next(reader, 60, &batch, &error) != 0) {
    fprintf(stderr, "next: %s\n", error);
    return 1;
  }
  for (uint32_t t = 0; t < batch.num_tensors; ++t) {
    const zephon_tensor* x = &batch.tensors[t];
    if (strcmp(x->name, "loss_mask") != 0) continue;
    printf("%d %d %llu %llu\n", x->dtype, x->ndim, (unsigned long long)x->shape[0],
           (unsigned long long)x->shape[1]);
    const unsigned char* bytes = (const unsigned char*)x->data;
    for (uint64_t i = 0; i < x->nbytes; ++i) printf("%d", bytes[i]);
    printf("\n");
  }
  zephon_release(reader, batch.seq, &error);
  zephon_detach(reader);
  return 0;
}
"""


def test_c_abi_reads_the_loss_mask_tensor_by_name(daemon, tmp_path):
    import subprocess

    lib = Path(zephon._native.LIB._name)
    write_sft(tmp_path / "sft.jsonl")
    ds = zephon.Dataset("sft", str(tmp_path / "sft.jsonl"), fmt="jsonl",
                        loss_mask_field="loss_mask")
    pipe = sft_pipeline([ds], daemon.socket)
    request = tmp_path / "request.json"
    request.write_text(json.dumps(pipe._request()))
    batch = next(iter(pipe))
    expected = np.array(batch["loss_mask"])
    batch.close()
    pipe.close()
    src = tmp_path / "reader.c"
    src.write_text(C_READER)
    exe = tmp_path / "reader"
    subprocess.run(["gcc", "-std=c11", "-Wall", "-Werror", f"-I{ROOT}", str(src), "-o",
                    str(exe), str(lib), f"-Wl,-rpath,{lib.parent}"], check=True,
                   capture_output=True, text=True)
    out = subprocess.run([str(exe), daemon.socket, str(request)], capture_output=True,
                         text=True, timeout=90)
    assert out.returncode == 0, out.stderr
    header, cells = out.stdout.split("\n")[:2]
    assert header == f"1 2 {B} {L}"  # shm::DType kUInt8 = 1, [rows, cols]
    assert cells == "".join(str(v) for v in expected.reshape(-1)), "same first batch"
    assert "0" in cells and "1" in cells
