"""Writes one JSONL line {"text": ...} of about --mb megabytes: the documents of
tests/tokenize/corpus (multilingual: CJK, Arabic, Devanagari, emoji, code, whitespace runs,
long numbers) joined by newlines and repeated, for the peak-memory measurement of one huge
document in docs/benchmarks.md ("Peak memory of one 100 MB document"). Documents holding a
special-token string ("<s>", "<|endoftext|>", ...) are left out: those split a text into
short pieces before it is normalized and pre-tokenized, so the document is one piece.

    /usr/bin/python3 tests/tokenize/big_document.py --mb 100 > /tmp/big.jsonl
"""
import argparse
import json
import sys
from pathlib import Path

CORPUS = Path(__file__).resolve().parent / "corpus" / "corpus.jsonl"
# Substrings of the added tokens of the Llama 2, Llama 3 and Qwen 3 tokenizer.json files.
SPECIALS = ("<s>", "</s>", "<unk>", "<|", "<think>", "</think>", "<tool", "</tool")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=100.0, help="size of the text in MB (1e6 bytes)")
    args = ap.parse_args()
    docs = [json.loads(l)["text"] for l in CORPUS.read_text(encoding="utf-8").split("\n") if l]
    unit = "\n".join(d for d in docs if d and not any(s in d for s in SPECIALS))
    target = int(args.mb * 1e6)
    text = unit * (target // len(unit.encode("utf-8")) + 1)
    text = text.encode("utf-8")[:target].decode("utf-8", errors="ignore")
    sys.stdout.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
