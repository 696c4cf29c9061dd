"""make bench-text: text JSONL -> tokenize -> pack_flat batches through zephond.

    PYTHONPATH=client/python /usr/bin/python3 tests/bench/text_bench.py [--quick]

Needs the Llama 3 tokenizer.json of `make setup-tokenize`. Every figure is measured in
this run, side by side:
  1-2. tokenizer only vs cold conversion, in rounds: each round runs
     //tokenizer:encode_tool --bench_seconds (the daemon's C++ tokenizer, one thread, warm
     word cache) on the corpus texts, then a cold attach on zephond --worker-threads 1 and
     2 with a fresh token cache (the JSONL shards are read, parsed, tokenized on the worker
     pool and written to the cache while the first attach opens the dataset). Conversion
     MB/s = the corpus's text bytes / the seconds the daemon reports for its conversions
     (status text_datasets.tokenize_seconds): per worker thread, and its ratio to the
     tokenizer alone of the same round (this host's speed drifts between minutes, so
     ratios are taken within a round; the median is reported).
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


def encode_tool_bench(corpus: Path, seconds: float, processes: int = 1) -> dict:
    """encode_tool --bench_seconds in `processes` concurrent processes (no shared state:
    what the machine gives that many tokenizing threads); MB/s and tokens/s summed."""
    lines = b"".join(p.read_bytes() for p in sorted(corpus.glob("*.jsonl")))
    procs = [subprocess.Popen([str(ENCODE_TOOL), "--tokenizer", str(TOKENIZER),
                               "--special_tokens", "eos", "--bench_seconds", str(seconds)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
             for _ in range(processes)]
    results = []
    for p in procs:
        out, _ = p.communicate(lines)
        if p.returncode != 0:
            raise RuntimeError(f"encode_tool failed with {p.returncode}")
        results.append(json.loads(out))
    return {"mb_per_s": sum(r["mb_per_s"] for r in results),
            "tokens_per_s": sum(r["tokens_per_s"] for r in results)}


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
    out = {"wall_s": wall, "first_batch_s": first, "batches": n, "steady_s": steady}
    # The daemon's figures for this instance's text datasets, read while still attached
    # (the instance goes when its last reader does).
    out["text_datasets"] = [t for i in zephon.daemon_status(cfg["socket"])["instances"]
                            for t in i.get("text_datasets", [])]
    pipe.close()
    return out


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
    ap.add_argument("--quick", action="store_true", help="16 MB of text instead of 64")
    ap.add_argument("--mb", type=float, default=None)
    ap.add_argument("--child", nargs=2)
    args = ap.parse_args()
    if args.child:
        kind, cfg = args.child[0], json.loads(args.child[1])
        print(json.dumps(child_tokenizer(cfg) if kind == "tokenizer" else child_pass(cfg)))
        return 0
    if not TOKENIZER.exists():
        sys.exit("bench-text: the Llama 3 tokenizer.json is missing: run `make setup-tokenize`")
    mb = args.mb or (16.0 if args.quick else 64.0)
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

    if not ENCODE_TOOL.exists():
        sys.exit("bench-text: build //tokenizer:encode_tool first (make bench-text does)")
    megatron = work / "megatron" / "web"
    megatron.parent.mkdir()
    child("tokenizer", {"corpus": str(corpus), "megatron": str(megatron)})

    def convert(threads: int, cache: Path, name: str) -> tuple[float, int]:
        """A cold attach on zephond --worker-threads `threads`: the daemon's own figures
        for the conversion (status text_datasets: seconds, files tokenized)."""
        d = daemon(work, name, threads, cache)
        try:
            r = child("pass", {"kind": "text", "corpus": str(corpus), "socket": d.socket,
                               "threads": threads, "batches": 1})
            t = r["text_datasets"][0]
            return float(t.get("tokenize_seconds", 0)), int(t.get("tokenized_files", 0))
        finally:
            d.stop()

    # The machine's speed drifts (shared host), so each round measures the tokenizer
    # alone and both pipelines back to back, and the ratios are taken within a round.
    rounds = 2 if args.quick else 3
    print(f"1-2. tokenizer only vs cold conversion, {rounds} rounds back to back")
    print("   tokenizer only: //tokenizer:encode_tool --bench_seconds (one thread, warm word "
          "cache: its best case)")
    print("   cold conversion: zephond on a fresh token cache, the first attach reads, parses, "
          "tokenizes on --worker-threads and writes every shard; MB/s from the daemon's own "
          "figures (status text_datasets: tokenize_seconds, over the corpus's text bytes)")
    per_thread: dict[int, list[float]] = {1: [], 2: []}  # pipeline / (threads x tokenizer)
    same_threads: dict[int, list[float]] = {1: [], 2: []}  # pipeline / tokenizer, same threads
    tok_scaling: list[float] = []  # tokenizer alone: 2 processes / 1
    for rnd in range(rounds):
        tok = {t: encode_tool_bench(corpus, 3.0 if args.quick else 5.0, t)["mb_per_s"]
               for t in (1, 2)}
        tok_scaling.append(tok[2] / tok[1])
        line = f"   round {rnd + 1}: tokenizer {tok[1]:5.1f} MB/s, 2 processes {tok[2]:5.1f}"
        for threads in (1, 2):
            cache = work / f"cache-cold-{threads}-{rnd}"
            secs, files = convert(threads, cache, f"cold{threads}-{rnd}")
            if files != SHARDS:
                sys.exit(f"bench-text: the cold attach tokenized {files} files, not {SHARDS}")
            mbs = size / 1e6 / max(secs, 1e-9)  # text bytes, as encode_tool counts
            per_thread[threads].append(mbs / threads / tok[1])
            same_threads[threads].append(mbs / tok[threads])
            line += (f" | {threads} thread{'s' if threads > 1 else ' '} {mbs:5.1f} MB/s "
                     f"(x{mbs / threads / tok[1]:.2f} per thread)")
        print(line)

    def median(v: list[float]) -> float:
        return sorted(v)[len(v) // 2]

    print(f"   median, conversion per worker thread / one tokenizer thread: 1 thread "
          f"x{median(per_thread[1]):.2f}, 2 threads x{median(per_thread[2]):.2f}")
    print(f"   median, conversion / the tokenizer alone on as many threads (processes): "
          f"1 thread x{median(same_threads[1]):.2f}, 2 threads x{median(same_threads[2]):.2f}")
    print(f"   scaling 1 -> 2 worker threads: x{2 * median(per_thread[2]) / median(per_thread[1]):.2f}"
          f" (the tokenizer alone, 1 -> 2 processes: x{median(tok_scaling):.2f})")
    warm_cache = work / "cache-cold-1-0"

    print("\n3. warm token cache (a restarted zephond) vs the same tokens as a Megatron dataset")
    rates = {}
    steady_batches = 200 if args.quick else 600
    for kind in ("text", "megatron"):
        best = None
        for rep in range(2):
            d = daemon(work, f"warm-{kind}-{rep}", 1, warm_cache)
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
