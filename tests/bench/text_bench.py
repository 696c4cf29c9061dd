"""make bench-text: text JSONL -> tokenize -> pack_flat batches through zephond.

    PYTHONPATH=client/python /usr/bin/python3 tests/bench/text_bench.py [--quick]

Needs the Llama 3 tokenizer.json of `make setup-tokenize`. Four tables, every figure
measured in this run, side by side:
  1. tokenizer only: //tokenizer:encode_tool --bench_seconds (the daemon's C++ tokenizer,
     one thread, warm word cache) on the corpus texts: MB/s of text, Mtokens/s.
  2. cold pipeline: zephond --worker-threads 1 and 2 on a fresh token cache; the JSONL
     shards are read, parsed, tokenized on the worker pool and written to the cache while
     the first attach opens the dataset. Conversion time = the cold attach's time to the
     first batch minus a warm attach's (the tokenizer load and attach costs both pay):
     MB/s per worker thread, and its ratio to the tokenizer-only figure.
  3. warm pipeline: a restarted zephond on the same token cache (nothing tokenized)
     against the same tokens read as a Megatron dataset through the same pipeline:
     steady-state batches/s after the first batch (exhausted_policy="repeat"), and the
     ratio.
  4. node view: one zephond, 8 rank processes = 2 DP groups x 4 TP peers on a cold
     cache: text bytes the daemon tokenized and its CPU seconds, against 8 per-rank
     tokenizations (what a loader inside every rank does).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
from zephond_process import Daemon  # noqa: E402

ENCODE_TOOL = ROOT / "bazel-bin" / "tokenizer" / "encode_tool"

TOKENIZER = (ROOT / "tests" / "tokenize" / "node_modules" / "@lenml" / "tokenizer-llama3" /
             "models" / "tokenizer.json")
CORPUS_DOCS = ROOT / "tests" / "tokenize" / "corpus" / "corpus.jsonl"
SEQ = 4097
MBS = 8
SHARDS = 4


# ----------------------------------------------------------------------------------
def make_corpus(root: Path, mb: float) -> tuple[Path, int, int]:
    """SHARDS text JSONL shards holding the tokenizer corpus repeated to `mb` MB of
    text; returns (directory, documents, text bytes)."""
    docs = [json.loads(l)["text"] for l in CORPUS_DOCS.read_text(encoding="utf-8")
            .split("\n") if l.strip()]
    docs = [d for d in docs if d.strip()]
    corpus = root / "text"
    corpus.mkdir(parents=True, exist_ok=True)
    out = [[] for _ in range(SHARDS)]
    n = size = 0
    while size < mb * 1e6:
        for d in docs:
            out[n % SHARDS].append(json.dumps({"id": n, "text": d}, ensure_ascii=False))
            size += len(d.encode("utf-8"))
            n += 1
    for s, lines in enumerate(out):
        (corpus / f"part-{s:02d}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return corpus, n, size


def corpus_texts(corpus: Path) -> list[str]:
    return [json.loads(l)["text"] for p in sorted(corpus.glob("*.jsonl"))
            for l in p.read_text(encoding="utf-8").split("\n") if l]


def text_pipeline(corpus: Path, socket: str, threads: int, repeat: bool = False, **options):
    import zephon
    ds = zephon.Dataset.from_path("web", str(corpus), fmt="jsonl")
    ws = zephon.StaticMixtureWorkSource([ds], seed=1, chunk_size=256,
                                        exhausted_policy="repeat" if repeat else "stop_after_passes")
    return (zephon.Pipeline(ws)
            .tokenize(tokenizer=str(TOKENIZER), field="text", special_tokens="eos")
            .pack_flat(max_length=SEQ).batch(MBS)
            .options(daemon=socket, num_threads=threads, attach_timeout_s=600, **options))


def megatron_pipeline(prefix: Path, socket: str, threads: int, repeat: bool = False):
    import zephon
    ds = zephon.Dataset.from_path("web", str(prefix), fmt="megatron")
    ws = zephon.StaticMixtureWorkSource([ds], seed=1, chunk_size=256,
                                        exhausted_policy="repeat" if repeat else "stop_after_passes")
    return (zephon.Pipeline(ws).pack_flat(max_length=SEQ).batch(MBS)
            .options(daemon=socket, num_threads=threads))


# ----------------------------------------------------------------------------------
# Children: one measurement per fresh interpreter.
def child_tokenizer(cfg: dict) -> dict:
    """Writes the corpus's token ids (as the pipeline tokenizes them) as a Megatron dataset."""
    import numpy as np
    import zephon
    texts = corpus_texts(Path(cfg["corpus"]))
    ids = zephon.Tokenizer(str(TOKENIZER)).encode_batch(texts, special_tokens="eos",
                                                        num_threads=2)
    zephon.write_megatron_dataset(cfg["megatron"], ids, dtype=np.int32)
    return {"tokens": sum(len(x) for x in ids)}


def encode_tool_bench(corpus: Path, seconds: float) -> dict:
    lines = b"".join(p.read_bytes() for p in sorted(corpus.glob("*.jsonl")))
    out = subprocess.run([str(ENCODE_TOOL), "--tokenizer", str(TOKENIZER), "--special_tokens",
                          "eos", "--bench_seconds", str(seconds)], input=lines,
                         capture_output=True, check=True)
    return json.loads(out.stdout)


def child_pass(cfg: dict) -> dict:
    """Reads `batches` batches (all of one pass when 0) and times them from attach."""
    import zephon
    t0 = time.perf_counter()
    repeat = bool(cfg.get("repeat"))
    if cfg["kind"] == "text":
        pipe = text_pipeline(Path(cfg["corpus"]), cfg["socket"], cfg["threads"], repeat,
                             **cfg.get("options", {}))
    else:
        pipe = megatron_pipeline(Path(cfg["corpus"]), cfg["socket"], cfg["threads"], repeat)
    n = 0
    first = t1 = None
    for b in pipe:
        if first is None:
            t1 = time.perf_counter()
            first = t1 - t0
        else:
            n += 1
        if cfg.get("batches") and n >= cfg["batches"]:
            break
    wall = time.perf_counter() - t0
    steady = time.perf_counter() - t1
    pipe.close()
    return {"wall_s": wall, "first_batch_s": first, "batches": n, "steady_s": steady}


def child(kind: str, cfg: dict) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "client" / "python"))
    out = subprocess.run([sys.executable, __file__, "--child", kind, json.dumps(cfg)],
                         env=env, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"{kind} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def daemon(workdir: Path, name: str, threads: int, cache: Path) -> Daemon:
    return Daemon(workdir / name, extra_args=["--worker-threads", str(threads),
                                              "--cache-dir", str(cache)], peer=False)


# ----------------------------------------------------------------------------------
def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="8 MB of text instead of 32")
    ap.add_argument("--mb", type=float, default=None)
    ap.add_argument("--child", nargs=2)
    args = ap.parse_args()
    if args.child:
        kind, cfg = args.child[0], json.loads(args.child[1])
        print(json.dumps(child_tokenizer(cfg) if kind == "tokenizer" else child_pass(cfg)))
        return 0
    if not TOKENIZER.exists():
        sys.exit("bench-text: the Llama 3 tokenizer.json is missing: run `make setup-tokenize`")
    mb = args.mb or (8.0 if args.quick else 32.0)
    work = Path(tempfile.mkdtemp(prefix="zephon-text-bench-"))
    corpus, ndocs, size = make_corpus(work, mb)
    cpu = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text()
                .splitlines() if l.startswith("model name")), "?")
    print(f"machine: {os.cpu_count()} CPUs ({cpu}), {platform.system()} {platform.release()}")
    print(f"command: PYTHONPATH=client/python /usr/bin/python3 tests/bench/text_bench.py"
          f"{' --quick' if args.quick else ''}")
    print(f"corpus: {ndocs} documents, {size / 1e6:.1f} MB of text in {SHARDS} JSONL shards "
          f"(tests/tokenize/corpus repeated); Llama 3 tokenizer.json; special_tokens=eos; "
          f"batches of {MBS} x {SEQ}\n")

    print("1. tokenizer only (//tokenizer:encode_tool --bench_seconds, one thread)")
    if not ENCODE_TOOL.exists():
        sys.exit("bench-text: build //tokenizer:encode_tool first (make bench-text does)")
    r = encode_tool_bench(corpus, 4.0 if args.quick else 8.0)
    tok_mbs = r["mb_per_s"]
    print(f"   {tok_mbs:7.1f} MB/s  {r['tokens_per_s'] / 1e6:6.2f} Mtokens/s")
    megatron = work / "megatron" / "web"
    megatron.parent.mkdir()
    child("tokenizer", {"corpus": str(corpus), "megatron": str(megatron)})

    def first_batch_s(threads: int, cache: Path, name: str) -> tuple[float, float]:
        d = daemon(work, name, threads, cache)
        try:
            c0 = d.cpu_s()
            r = child("pass", {"kind": "text", "corpus": str(corpus), "socket": d.socket,
                               "threads": threads, "batches": 1})
            return r["first_batch_s"], d.cpu_s() - c0
        finally:
            d.stop()

    print("\n2. cold pipeline: conversion into a fresh token cache at attach")
    for threads in (1, 2):
        cache = work / f"cache-cold-{threads}"
        cold, cold_cpu = first_batch_s(threads, cache, f"cold{threads}")
        warm, warm_cpu = first_batch_s(threads, cache, f"rewarm{threads}")
        mbs = size / 1e6 / max(cold - warm, 1e-9)
        print(f"   --worker-threads {threads}: first batch after {cold:.2f} s cold, "
              f"{warm:.2f} s warm -> {mbs:6.1f} MB/s converted ({mbs / threads:5.1f} per "
              f"worker thread, x{mbs / threads / tok_mbs:.2f} the tokenizer alone); zephond "
              f"CPU {cold_cpu:.2f} s cold, {warm_cpu:.2f} s warm")

    print("\n3. warm token cache (a restarted zephond) vs the same tokens as a Megatron dataset")
    rates = {}
    steady_batches = 200 if args.quick else 600
    for kind in ("text", "megatron"):
        best = None
        for rep in range(2):
            d = daemon(work, f"warm-{kind}-{rep}", 1, work / "cache-cold-1")
            try:
                r = child("pass", {"kind": kind, "corpus": str(corpus if kind == "text"
                                                               else megatron),
                                   "socket": d.socket, "threads": 1, "repeat": True,
                                   "batches": steady_batches})
            finally:
                d.stop()
            rate = r["batches"] / r["steady_s"]
            best = rate if best is None else max(best, rate)
        rates[kind] = best
        print(f"   {kind:<9} {best:8.1f} batches/s after the first batch (best of 2, "
              f"{steady_batches} batches, --worker-threads 1)")
    print(f"   ratio warm text / Megatron: {rates['text'] / rates['megatron']:.2f}")

    print("\n4. node view: 2 DP groups x 4 TP peers on one zephond, cold cache")
    d = daemon(work, "node", 2, work / "cache-node")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "client" / "python"))
    try:
        c0 = d.cpu_s()
        procs = []
        for rank in range(8):
            options = {"world_size": 8, "global_rank": rank, "dp_degree": 2,
                       "dp_group_id": rank // 4, "run_id": "node-view",
                       "aggregate_dir": str(work / "agg")}
            cfg = {"kind": "text", "corpus": str(corpus), "socket": d.socket, "threads": 2,
                   "batches": 20, "options": options}
            procs.append(subprocess.Popen([sys.executable, __file__, "--child", "pass",
                                           json.dumps(cfg)], env=env, stdout=subprocess.PIPE,
                                          text=True))
        results = [json.loads(p.communicate(timeout=1800)[0].strip().splitlines()[-1])
                   for p in procs]
        dcpu = d.cpu_s() - c0
        status = d.status()
    finally:
        d.stop()
    cache = status.get("token_cache", {})
    print(f"   8 ranks read {sum(r['batches'] for r in results)} batches; zephond used "
          f"{dcpu:.2f} CPU s; token cache: {json.dumps(cache)}")
    print(f"   text tokenized by the node: {size / 1e6:.1f} MB once (per node, shared by both "
          f"groups); a loader in every rank would tokenize 8 x {size / 1e6:.1f} = "
          f"{8 * size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
