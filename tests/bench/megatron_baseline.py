"""Baseline: the real Megatron-LM ``GPTDataset`` behind a torch ``DataLoader``.

    /usr/bin/python3 tests/bench/megatron_baseline.py --megatron-lm /work/megatron-lm \\
        --prefix /tmp/mcorpus/shard-0 [--seq-length 2048] [--micro-batch 8] \\
        [--batches 200] [--workers 0] [--no-attention-mask] [--json]

What runs: Megatron's own ``BlendedMegatronDatasetBuilder(GPTDataset, ...)`` with a
``GPTDatasetConfig`` set up the way ``pretrain_gpt.py`` does it (blend = the given prefixes,
split "1,0,0", Megatron's defaults for masks and position ids), imported from a Megatron-LM
checkout and never copied here, then ``torch.utils.data.DataLoader(ds,
batch_size=micro_batch, num_workers=workers)``. ``GPTDataset`` already shuffles through its
shuffle index, so the loader reads indices in order, as Megatron's
``MegatronPretrainingSampler`` does with one data-parallel rank.

What is measured, in one process, twice:

* cold: a fresh, empty ``path_to_cache`` directory, so Megatron builds its document,
  sample and shuffle indices (``helpers_cpp.build_sample_idx``) and writes them as .npy
  files;
* warm: the same cache directory again, so Megatron memory-maps the .npy files.

Each run reports ``first_batch_s`` (from the start of dataset construction, .idx reading
included, to the first batch out of the loader, with the worker start-up when workers > 0),
``build_s`` (dataset construction alone), ``batches_per_s`` over the ``--batches`` batches
that follow the first, the trainer process's CPU seconds (``trainer_cpu_s`` for the whole
run, ``trainer_cpu_s_steady`` for the following batches) and, with workers, the loader
workers' CPU seconds read from /proc before they exit. "Cold" is Megatron's index cache
only: the corpus files stay in the OS page cache between the two runs.

Megatron import on an old torch: ``megatron/core/__init__.py`` pulls in the whole model
stack (parallel_state, dist_checkpointing -> ``torch.distributed.checkpoint``, which
torch 1.13 lacks), none of which the dataset code uses. The bench therefore puts package
shells for ``megatron`` and ``megatron.core`` into ``sys.modules`` (their ``__path__`` is the
checkout, so every submodule is Megatron's own file) and two small stand-ins:
``megatron.core.utils`` (only ``log_single_rank``, Megatron's own function from
``megatron/core/_rank_utils.py``) and ``megatron.core.safe_globals`` (only
``safe_numpy_load``: ``numpy.load`` with pickling refused; the real module needs
``numpy.dtypes`` from numpy >= 1.25 and imports the optimizer and transformer packages).
The .npy index files hold plain integer arrays, so loading them never unpickles anything.
``helpers.cpp`` is compiled with the flags of Megatron's own Makefile into
``~/.cache/zephon-bench/megatron_helpers/<hash>/`` (or ``$ZEPHON_BENCH_CACHE``) and loaded as
``megatron.core.datasets.helpers_cpp``. The tokenizer is a stand-in with the attributes the
dataset reads (``eod``, ``pad``, ``vocab_size``, ``unique_identifiers``); ``eod`` is only used
when reset_position_ids / reset_attention_mask / eod_mask_loss are on, and they are off.

Because ``measure()`` installs those modules into ``sys.modules``, call it in a process of
its own, e.g. ``subprocess.run([sys.executable, "tests/bench/megatron_baseline.py", ...,
"--json"])`` and read the one JSON line it prints. No figure here is asserted on.
"""
from __future__ import annotations

import argparse
import gc
import hashlib
import importlib.machinery
import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import types
from pathlib import Path
from typing import Sequence

# Files a Megatron-LM checkout must have for this bench to run.
_REQUIRED = (
    "megatron/core/datasets/gpt_dataset.py",
    "megatron/core/datasets/blended_megatron_dataset_builder.py",
    "megatron/core/datasets/helpers.cpp",
    "megatron/core/_rank_utils.py",
)
_HELPERS_MODULE = "megatron.core.datasets.helpers_cpp"


class BaselineError(RuntimeError):
    """A problem with the bench's inputs or environment; the message names the fix."""


# ----------------------------------------------------------------------------------
# Locating and importing Megatron
def check_checkout(megatron_lm: str | os.PathLike) -> Path:
    """Returns the checkout root, or raises BaselineError naming --megatron-lm."""
    if not megatron_lm:
        raise BaselineError("--megatron-lm is required: pass the root of a Megatron-LM "
                            "checkout (git clone https://github.com/NVIDIA/Megatron-LM)")
    root = Path(megatron_lm).expanduser().resolve()
    if not root.is_dir():
        raise BaselineError(f"--megatron-lm {megatron_lm}: no such directory; pass the root "
                            "of a Megatron-LM checkout (the folder holding megatron/core/)")
    missing = [rel for rel in _REQUIRED if not (root / rel).is_file()]
    if missing:
        raise BaselineError(f"--megatron-lm {megatron_lm}: not a Megatron-LM checkout "
                            f"(missing {', '.join(missing)}); pass the root of "
                            "github.com/NVIDIA/Megatron-LM, the folder holding megatron/core/")
    return root


def _checkout_commit(root: Path) -> str | None:
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], check=True,
                             capture_output=True, text=True)
        return out.stdout.strip() or None
    except (OSError, subprocess.CalledProcessError):
        return None


def _pybind11_include() -> str:
    try:
        import pybind11  # type: ignore
        return pybind11.get_include()
    except ImportError:
        pass
    for base in ("/usr/include", "/usr/local/include"):
        if Path(base, "pybind11", "pybind11.h").is_file():
            return base
    raise BaselineError("pybind11 headers not found (needed to compile Megatron's "
                        "megatron/core/datasets/helpers.cpp); install them with "
                        "`apt-get install -y pybind11-dev` or `pip install pybind11`")


def compile_helpers(root: Path) -> dict:
    """Compiles Megatron's helpers.cpp once per (source, Python, pybind11) into the bench
    cache, with the flags of megatron/core/datasets/Makefile. Returns path and timing."""
    src = root / "megatron/core/datasets/helpers.cpp"
    ext = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    py_include = sysconfig.get_paths()["include"]
    pb_include = _pybind11_include()
    cxx = os.environ.get("CXX", "g++")
    flags = ["-O3", "-Wall", "-shared", "-std=c++17", "-fPIC"]
    key = hashlib.sha256()
    for part in (src.read_bytes(), ext.encode(), py_include.encode(), pb_include.encode(),
                 cxx.encode(), " ".join(flags).encode()):
        key.update(part)
        key.update(b"\0")
    cache = Path(os.environ.get("ZEPHON_BENCH_CACHE",
                                Path.home() / ".cache" / "zephon-bench"))
    out_dir = cache / "megatron_helpers" / key.hexdigest()[:16]
    so = out_dir / f"helpers_cpp{ext}"
    if so.is_file():
        return {"path": str(so), "compiled_now": False, "compile_s": 0.0}
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / f".helpers_cpp.{os.getpid()}{ext}"
    cmd = [cxx, *flags, f"-I{py_include}", f"-I{pb_include}", str(src), "-o", str(tmp)]
    t0 = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True)
    except FileNotFoundError:
        raise BaselineError(f"C++ compiler {cxx!r} not found (needed for Megatron's "
                            "helpers.cpp); install g++ or set CXX") from None
    if done.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise BaselineError(f"compiling {src} failed ({' '.join(cmd)}):\n"
                            f"{done.stderr[-3000:]}")
    os.replace(tmp, so)
    return {"path": str(so), "compiled_now": True,
            "compile_s": round(time.perf_counter() - t0, 3)}


def _shell_package(name: str, path: Path) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__path__ = [str(path)]
    mod.__file__ = None
    mod.__package__ = name
    return mod


def import_megatron(megatron_lm: str | os.PathLike) -> types.SimpleNamespace:
    """Imports Megatron's dataset code from the checkout (see the module docstring for the
    stand-ins) and returns the classes the bench uses."""
    root = check_checkout(megatron_lm)
    loaded = sys.modules.get("megatron")
    if loaded is not None:
        where = list(getattr(loaded, "__path__", []))
        if where != [str(root / "megatron")]:
            raise BaselineError(f"a different `megatron` package is already imported ({where}); "
                                "run the bench in a fresh process (--megatron-lm "
                                f"{megatron_lm})")
    t0 = time.perf_counter()
    helpers = compile_helpers(root)
    if loaded is None:
        megatron = _shell_package("megatron", root / "megatron")
        core = _shell_package("megatron.core", root / "megatron" / "core")
        megatron.core = core
        sys.modules["megatron"] = megatron
        sys.modules["megatron.core"] = core

        from megatron.core import _rank_utils  # Megatron's own, light module

        utils = types.ModuleType("megatron.core.utils")
        utils.__doc__ = ("Bench stand-in: megatron/core/utils.py imports parallel_state and "
                         "dist_checkpointing; the dataset code only needs log_single_rank.")
        utils.log_single_rank = _rank_utils.log_single_rank
        sys.modules["megatron.core.utils"] = utils
        core.utils = utils

        import numpy

        def safe_numpy_load(path, **kwargs):
            """numpy.load with pickling refused (the index .npy files are integer arrays)."""
            kwargs["allow_pickle"] = False
            return numpy.load(path, **kwargs)

        safe = types.ModuleType("megatron.core.safe_globals")
        safe.__doc__ = ("Bench stand-in: the real module needs numpy.dtypes (numpy >= 1.25) "
                        "and imports megatron.core.optimizer and transformer.")
        safe.safe_numpy_load = safe_numpy_load
        sys.modules["megatron.core.safe_globals"] = safe
        core.safe_globals = safe

        import megatron.core.datasets as datasets_pkg

        loader = importlib.machinery.ExtensionFileLoader(_HELPERS_MODULE, helpers["path"])
        spec = importlib.util.spec_from_file_location(_HELPERS_MODULE, helpers["path"],
                                                      loader=loader)
        helpers_cpp = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(helpers_cpp)
        sys.modules[_HELPERS_MODULE] = helpers_cpp
        datasets_pkg.helpers_cpp = helpers_cpp

    from megatron.core.datasets.blended_megatron_dataset_builder import (
        BlendedMegatronDatasetBuilder)
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
    from megatron.core.datasets import helpers as _helpers  # noqa: F401 (fail here, not later)

    return types.SimpleNamespace(
        root=root, commit=_checkout_commit(root), helpers=helpers,
        import_s=round(time.perf_counter() - t0 - helpers["compile_s"], 3),
        BlendedMegatronDatasetBuilder=BlendedMegatronDatasetBuilder,
        GPTDataset=GPTDataset, GPTDatasetConfig=GPTDatasetConfig)


class BenchTokenizer:
    """Stand-in for a MegatronTokenizer with only what GPTDataset / MegatronDataset read.
    pad = -1 means "no pad token", like Megatron's NullTokenizer."""

    def __init__(self, vocab_size: int = 65536, eod: int = 0, pad: int = -1):
        self.vocab_size = vocab_size
        self.eod = eod
        self.pad = pad

    @property
    def unique_identifiers(self) -> dict:  # part of Megatron's cache-key hash
        return {"class": "zephon-bench.BenchTokenizer", "vocab_size": self.vocab_size,
                "eod": self.eod, "pad": self.pad}


# ----------------------------------------------------------------------------------
# Measuring
def _check_prefixes(prefix: str | Sequence[str]) -> list[str]:
    prefixes = [prefix] if isinstance(prefix, (str, os.PathLike)) else list(prefix)
    if not prefixes:
        raise BaselineError("--prefix is required: the path prefix of a Megatron .bin/.idx "
                            "pair (e.g. /tmp/mcorpus/shard-0 for shard-0.bin + shard-0.idx)")
    out = []
    for p in prefixes:
        p = os.fspath(p)
        for suffix in (".bin", ".idx"):
            if p.endswith(suffix):
                p = p[: -len(suffix)]
        missing = [s for s in (".bin", ".idx") if not os.path.isfile(p + s)]
        if missing:
            raise BaselineError(f"--prefix {p}: {' and '.join(p + s for s in missing)} not "
                                "found; pass the prefix of a Megatron .bin/.idx pair, e.g. one "
                                "written by zephon.write_megatron_dataset")
        out.append(os.path.abspath(p))
    return out


def _worker_pids(iterator) -> list[int]:
    return [w.pid for w in getattr(iterator, "_workers", []) if w.pid]


def _proc_cpu_s(pids: list[int]) -> float | None:
    if not pids:
        return None
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime + stime
        except (OSError, IndexError, ValueError):
            return None
    return round(total / tick, 3)


def _run_once(mg, prefixes: list[str], cache_dir: str, seq_length: int, micro_batch: int,
              batches: int, workers: int, attention_mask: bool, seed: int) -> dict:
    import torch

    gc.collect()
    need = micro_batch * (batches + 1)
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    config = mg.GPTDatasetConfig(
        random_seed=seed, sequence_length=seq_length, blend=(prefixes, None), split="1,0,0",
        path_to_cache=cache_dir, tokenizer=BenchTokenizer(), reset_position_ids=False,
        reset_attention_mask=False, eod_mask_loss=False,
        create_attention_mask=attention_mask, mmap_bin_files=True)
    train, _, _ = mg.BlendedMegatronDatasetBuilder(
        mg.GPTDataset, [need, None, None], lambda: True, config).build()
    t_built = time.perf_counter()
    if train is None or len(train) < need:
        raise BaselineError(f"--prefix {' '.join(prefixes)}: Megatron built "
                            f"{0 if train is None else len(train)} samples of {seq_length} "
                            f"tokens, the bench needs {need} (--micro-batch {micro_batch} x "
                            f"(--batches {batches} + 1)); use fewer --batches or a bigger corpus")
    loader = torch.utils.data.DataLoader(train, batch_size=micro_batch, num_workers=workers)
    it = iter(loader)
    first = next(it)
    t_first = time.perf_counter()
    cpu_first = time.process_time()
    for _ in range(batches):
        batch = next(it)
    t_end = time.perf_counter()
    cpu_end = time.process_time()
    worker_cpu = _proc_cpu_s(_worker_pids(it))
    shape = list(first["tokens"].shape)
    keys = sorted(first)
    del it, loader, first, batch
    steady = t_end - t_first
    return {
        "build_s": round(t_built - t0, 4),
        "first_batch_s": round(t_first - t0, 4),
        "batches_per_s": round(batches / steady, 2) if steady > 0 else None,
        "tokens_per_s": round(batches * micro_batch * seq_length / steady) if steady > 0 else None,
        "trainer_cpu_s": round(cpu_end - cpu0, 3),
        "trainer_cpu_s_steady": round(cpu_end - cpu_first, 3),
        "worker_cpu_s": worker_cpu,
        "samples_in_dataset": len(train),
        "batch_keys": keys,
        "tokens_shape": shape,
    }


def measure(megatron_lm: str | os.PathLike, prefix: str | Sequence[str], seq_length: int = 2048,
            micro_batch: int = 8, batches: int = 200, workers: int = 0,
            attention_mask: bool = True, seed: int = 1234) -> dict:
    """Cold and warm runs of Megatron's GPTDataset + DataLoader (see the module docstring).
    Installs Megatron modules into sys.modules: call it in a fresh process."""
    if seq_length < 1 or micro_batch < 1 or batches < 1 or workers < 0:
        raise BaselineError("--seq-length, --micro-batch and --batches must be >= 1 and "
                            "--workers >= 0")
    prefixes = _check_prefixes(prefix)
    mg = import_megatron(megatron_lm)
    import torch

    cache_dir = tempfile.mkdtemp(prefix="zephon-megatron-index-cache-")
    try:
        args = (mg, prefixes, cache_dir, seq_length, micro_batch, batches, workers,
                attention_mask, seed)
        cold = _run_once(*args)
        cached = sorted(os.listdir(cache_dir))
        warm = _run_once(*args)
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    return {
        "bench": "megatron_baseline",
        "megatron_lm": str(mg.root),
        "megatron_commit": mg.commit,
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "prefixes": prefixes,
        "seq_length": seq_length,
        "micro_batch": micro_batch,
        "batches": batches,
        "workers": workers,
        "attention_mask": attention_mask,
        "helpers": mg.helpers,
        "import_s": mg.import_s,
        "index_cache_files": len(cached),
        "cold": cold,
        "warm": warm,
    }


def _format(result: dict) -> str:
    lines = [f"Megatron GPTDataset + DataLoader  ({result['megatron_lm']}, "
             f"torch {result['torch']})",
             f"seq {result['seq_length']}, micro-batch {result['micro_batch']}, "
             f"{result['batches']} batches after the first, workers {result['workers']}, "
             f"attention mask {'on' if result['attention_mask'] else 'off'}"]
    for name in ("cold", "warm"):
        r = result[name]
        worker = "" if r["worker_cpu_s"] is None else f", worker CPU {r['worker_cpu_s']} s"
        lines.append(f"  {name}: build {r['build_s']:.3f} s, "
                     f"first batch {r['first_batch_s']:.3f} s, "
                     f"{r['batches_per_s']} batches/s, trainer CPU {r['trainer_cpu_s']} s "
                     f"({r['trainer_cpu_s_steady']} s steady){worker}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--megatron-lm", required=True,
                    help="root of a Megatron-LM checkout (the folder holding megatron/core/)")
    ap.add_argument("--prefix", required=True, nargs="+",
                    help="Megatron .bin/.idx path prefix(es); several make a Megatron blend")
    ap.add_argument("--seq-length", type=int, default=2048)
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument("--batches", type=int, default=200,
                    help="batches timed after the first one")
    ap.add_argument("--workers", type=int, default=0, help="DataLoader num_workers")
    ap.add_argument("--no-attention-mask", action="store_true",
                    help="like Megatron's --no-create-attention-mask-in-dataloader")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--verbose", action="store_true", help="show Megatron's INFO logs")
    ap.add_argument("--json", action="store_true", help="print one JSON line")
    args = ap.parse_args(argv)
    if args.verbose:
        logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    try:
        result = measure(args.megatron_lm, args.prefix, args.seq_length, args.micro_batch,
                         args.batches, args.workers, not args.no_attention_mask, args.seed)
    except BaselineError as e:
        print(f"megatron_baseline: {e}", file=sys.stderr)
        return 2
    print(json.dumps(result) if args.json else _format(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
