"""SFT with Zephon: prompt/completion records, best-fit packing with padding, and the
loss mask applied by to_training (issue 16).

    PYTHONPATH=client/python python3 examples/sft.py [--socket PATH] [--tokenizer PATH]

1. Writes a prompt/completion JSONL (a few hundred records) into a temporary directory.
2. Starts a zephond on a private socket (or uses --socket).
3. tokenize(field=["prompt", "completion"], loss_on=["completion"]): each record becomes
   BOS + prompt tokens + completion tokens + EOS, the prompt's (and BOS's) masked.
4. pack_flat(best_fit) pads every row to max_length; batches carry "loss_mask".
5. to_training(): labels whose target is a prompt token or padding are ignore_index
   (label-aligned: labels[:, t] = tokens[:, t + 1] is kept iff loss_mask[:, t + 1]).

Prints a few rows (prompt tokens in brackets: masked; "." is padding) and checks that
every document in every row is masked exactly over its prompt; the last line is a JSON
summary, and "SFT EXAMPLE PASSED" / "FAILED" before it.
The default tokenizer is the tiny Llama-2-style one of the C++ tests (vocabulary "a",
"b", "ab" and the word marker; BOS 1, EOS 2): pass --tokenizer for a real one (a
tokenizer.json or an HF model directory; its text then needs no a/b alphabet).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import zephon

REPO = Path(__file__).resolve().parents[1]
MAX_LENGTH, MICROBATCH, PAD, IGNORE = 65, 4, 0, -100


def tiny_tokenizer(workdir: Path) -> Path:
    header = (REPO / "tokenizer" / "tiny_tokenizer_testing.h").read_text(encoding="utf-8")
    path = workdir / "tokenizer.json"
    path.write_text(re.search(r'R"json\((.*)\)json"', header, re.S).group(1), encoding="utf-8")
    return path


def write_records(path: Path, n: int) -> None:
    """n prompt/completion pairs of words over the tiny tokenizer's alphabet."""
    words = ["a", "b", "ab", "ba", "aab", "abb"]
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            prompt = " ".join(words[(i * 5 + k) % 6] for k in range(2 + i % 9))
            completion = " ".join(words[(i * 7 + k) % 6] for k in range(1 + (i * 3) % 11))
            f.write(json.dumps({"prompt": prompt, "completion": completion}) + "\n")


def start_daemon(workdir: Path) -> tuple[subprocess.Popen, str]:
    socket = str(workdir / "zephond.sock")
    zephond = zephon._native.zephond_path()
    if zephond is None:
        sys.exit("zephond binary not found; run `make build`")
    proc = subprocess.Popen([zephond, "--socket", socket, "--cache-dir", str(workdir / "cache"),
                             "--log-file", str(workdir / "zephond.log")])
    deadline = time.monotonic() + 15
    while not os.path.exists(socket):
        if time.monotonic() > deadline or proc.poll() is not None:
            sys.exit(f"zephond did not start; see {workdir / 'zephond.log'}")
        time.sleep(0.05)
    return proc, socket


def show_row(tokens: np.ndarray, mask: np.ndarray, valid: int) -> str:
    cells = [str(t) if m else f"[{t}]" for t, m in zip(tokens[:valid], mask[:valid])]
    return " ".join(cells) + (" " + "." * (len(tokens) - valid) if valid < len(tokens) else "")


def documents_masked_over_their_prompts(positions, mask, valid) -> bool:
    """Each document segment of a row is masked (0) for a non-empty prefix (BOS + prompt),
    then trained (1) to its end; padding is 0."""
    for r in range(positions.shape[0]):
        if np.any(mask[r, valid[r]:]):
            return False
        starts = list(np.flatnonzero(positions[r, :valid[r]] == 0)) + [int(valid[r])]
        for a, b in zip(starts[:-1], starts[1:]):
            seg = mask[r, a:b].tolist()
            prompt = seg.index(1) if 1 in seg else len(seg)
            if prompt == 0 or prompt == len(seg) or not all(seg[prompt:]):
                return False
    return True


def run(socket: str, workdir: Path, tokenizer: Path, records: int, batches: int) -> dict:
    data = workdir / "sft.jsonl"
    write_records(data, records)
    ws = zephon.StaticMixtureWorkSource([zephon.Dataset("sft", str(data), fmt="jsonl")],
                                        seed=11, chunk_size=32)
    pipe = (zephon.Pipeline(ws)
            .tokenize(str(tokenizer), field=["prompt", "completion"], loss_on=["completion"])
            .pack_flat(MAX_LENGTH, algorithm="best_fit", pad_token_id=PAD, num_bins=8)
            .batch(MICROBATCH)
            .options(daemon=socket, canonical_replicas=1))
    ok, trained, labels_total, shown = True, 0, 0, 0
    print(f"{records} prompt/completion records -> tokenize(loss_on=['completion']) -> "
          f"pack_flat({MAX_LENGTH}, best_fit) -> batch({MICROBATCH})")
    print("rows: [id] = masked (BOS and prompt), . = padding")
    for step, batch in enumerate(pipe):
        tokens = np.array(batch["tokens"])
        positions = np.array(batch["positions"])
        valid = np.array(batch["valid_tokens"])
        mask = np.array(batch["loss_mask"])
        out = batch.to_training(return_labels=True, as_torch=False, ignore_index=IGNORE,
                                return_loss_mask=True,
                                return_num_valid_tokens=True)
        keep = out["loss_mask"]
        ok = ok and documents_masked_over_their_prompts(positions, mask, valid)
        ok = ok and bool(np.all(out["labels"][~keep] == IGNORE))
        ok = ok and bool(np.array_equal(out["labels"][keep], tokens[:, 1:][keep]))
        trained += out["num_valid_tokens"]
        labels_total += out["labels"].size
        if shown < 3:
            print(f"  batch {step} row 0: {show_row(tokens[0], mask[0], int(valid[0]))}")
            shown += 1
        batch.close()
        if step + 1 == batches:
            break
    explain = pipe.explain()
    pipe.close()
    summary = {"batches": min(step + 1, batches), "trained_labels": trained,
               "labels": labels_total, "trained_fraction": round(trained / labels_total, 4),
               "masks_ok": ok}
    print("\n".join(line for line in explain.splitlines()
                    if "loss mask" in line or "packing lane" in line))
    return summary


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--socket", help="a running zephond's socket (default: start one)")
    p.add_argument("--tokenizer", help="tokenizer.json or HF model directory "
                                       "(default: the tiny test tokenizer)")
    p.add_argument("--records", type=int, default=300)
    p.add_argument("--batches", type=int, default=20)
    args = p.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="zephon-sft-"))
    tokenizer = Path(args.tokenizer) if args.tokenizer else tiny_tokenizer(workdir)
    daemon = None
    socket = args.socket
    if socket is None:
        daemon, socket = start_daemon(workdir)
    try:
        summary = run(socket, workdir, tokenizer, args.records, args.batches)
    finally:
        if daemon is not None:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=15)
    print("SFT EXAMPLE", "PASSED" if summary["masks_ok"] else "FAILED")
    print(json.dumps(summary))
    return 0 if summary["masks_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
