"""A first attach that tokenizes a text corpus for longer than attach_timeout_s: zephond
reports its conversions while the attach waits (AttachProgress), the client's deadline
runs from the last progress, and an attach abandoned mid-conversion still leaves the
node's token cache complete, each file tokenized once.

The tokenizer is the tiny one of test_tokenize_pipeline (about 20 MB/s of this text on
one thread here), on --worker-threads 1 so the conversion takes seconds."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

import zephon
from conftest import Daemon, assert_rings_freed_and_stop
from test_tokenize_pipeline import text_pipeline, tiny_tokenizer_json

FILES = 4
LINES_PER_FILE = 25_000  # ~10 MB a file


def write_corpus(root: Path) -> Path:
    root.mkdir(parents=True)
    words = ["ab", "a", "b", "aab", "bab", "abba", "x", "hello", "ab" * 20]
    lines = [json.dumps({"text": " ".join(words[(i * 7 + k) % len(words)] for k in range(100))})
             for i in range(500)]
    block = "\n".join(lines) + "\n"
    for f in range(FILES):
        (root / f"part-{f}.jsonl").write_text(block * (LINES_PER_FILE // len(lines)))
    return root


@pytest.fixture
def slow_corpus(tmp_path) -> tuple[Path, Path]:
    tok = tmp_path / "tok" / "tokenizer.json"
    tok.parent.mkdir()
    tok.write_text(tiny_tokenizer_json(), encoding="utf-8")
    return write_corpus(tmp_path / "text"), tok


def tokenized_files(d: Daemon) -> list[str]:
    """The files the daemon's log says it tokenized, one entry per conversion."""
    log = d.log.read_text()
    return re.findall(r"tokenized (\S+): \d+ records", log)


def test_a_conversion_longer_than_the_attach_timeout_attaches(tmp_path, slow_corpus):
    corpus, tok = slow_corpus
    d = Daemon(tmp_path / "d", extra_args=["--worker-threads", "1", "--cache-dir",
                                           str(tmp_path / "cache")])
    try:
        timeout = 1.2
        p = text_pipeline(corpus, str(tok), daemon=d.socket, attach_timeout_s=timeout)
        start = time.monotonic()
        it = iter(p)
        first_tokens = next(it)["tokens"].size
        elapsed = time.monotonic() - start
        text = [t for i in zephon.daemon_status(d.socket)["instances"]
                for t in i.get("text_datasets", [])]
        p.close()
        assert first_tokens > 0
        assert text[0]["tokenized_files"] == FILES
        assert int(text[0]["records"]) == FILES * LINES_PER_FILE
        seconds = float(text[0]["tokenize_seconds"])
        if seconds < 2 * timeout:
            pytest.skip(f"the conversion took {seconds:.2f} s here, too little over "
                        f"attach_timeout_s={timeout} to show anything")
        # The attach outlived its timeout several times over: progress moved the deadline.
        assert elapsed > 2 * timeout
        assert sorted(Path(f).name for f in tokenized_files(d)) == \
            [f"part-{i}.jsonl" for i in range(FILES)]
    finally:
        assert_rings_freed_and_stop(d)


def test_an_attach_abandoned_mid_conversion_leaves_the_cache_complete(tmp_path, slow_corpus):
    corpus, tok = slow_corpus
    d = Daemon(tmp_path / "d", extra_args=["--worker-threads", "1", "--cache-dir",
                                           str(tmp_path / "cache")])
    try:
        # Gives up long before the conversion ends (and before any progress message).
        p = text_pipeline(corpus, str(tok), daemon=d.socket, attach_timeout_s=0.3)
        with pytest.raises(zephon.errors.ZephonTimeoutError, match="raise attach_timeout_s"):
            next(iter(p))
        p.close()
        # zephond goes on converting; the next attach waits for (or finds) the same
        # conversions instead of starting its own.
        p = text_pipeline(corpus, str(tok), daemon=d.socket, attach_timeout_s=60)
        assert next(iter(p))["tokens"].size > 0
        p.close()
        deadline = time.monotonic() + 30
        while len(tokenized_files(d)) < FILES and time.monotonic() < deadline:
            time.sleep(0.1)
        converted = sorted(Path(f).name for f in tokenized_files(d))
        assert converted == [f"part-{i}.jsonl" for i in range(FILES)], converted
        # A third attach reads the cache only.
        p = text_pipeline(corpus, str(tok), daemon=d.socket)
        it = iter(p)
        next(it)
        text = [t for i in zephon.daemon_status(d.socket)["instances"]
                for t in i.get("text_datasets", [])]
        p.close()
        assert text[0].get("tokenized_files", 0) == 0
        assert int(text[0]["records"]) == FILES * LINES_PER_FILE
    finally:
        assert_rings_freed_and_stop(d)
