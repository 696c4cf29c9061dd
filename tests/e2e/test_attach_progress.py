"""A first attach that tokenizes a text corpus for longer than attach_timeout_s: zephond
reports its conversions while the attach waits (AttachProgress), the client's deadline
runs from the last progress, and an attach abandoned mid-conversion still leaves the
node's token cache complete, each file tokenized once.

The tokenizer is the tiny one of test_tokenize_pipeline (about 20 MB/s of this text on
one thread here), on --worker-threads 1 so the conversion takes seconds."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
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


# A rank reading its first batch from the slow corpus, its progress line due after
# 0.3 s (instead of 3 s) so that the conversion shows several lines.
_RANK_SCRIPT = r"""
import sys
sys.path.insert(0, {e2e!r})
import zephon, zephon.progress
zephon.progress.FIRST_LINE_AFTER_S = 0.3
zephon.progress.EVERY_S = 0.2
from test_tokenize_pipeline import text_pipeline
options = dict(daemon={socket!r}, attach_timeout_s=120)
if {silenced!r}:
    options["progress"] = False
p = text_pipeline({corpus!r}, {tok!r}, **options)
assert next(iter(p))["tokens"].size > 0
p.close()
print("rank done", flush=True)
"""


def _run_rank(tmp_path: Path, corpus: Path, tok: Path, name: str, *, tty: bool,
              silenced: bool = False) -> tuple[str, Daemon]:
    """Runs _RANK_SCRIPT against a fresh daemon (an empty token cache: the conversion
    happens) with stderr on a pseudo-terminal or a pipe; returns what stderr got."""
    d = Daemon(tmp_path / name, extra_args=["--worker-threads", "1", "--cache-dir",
                                            str(tmp_path / name / "cache")])
    script = _RANK_SCRIPT.format(e2e=str(Path(__file__).parent), socket=d.socket,
                                 silenced=silenced, corpus=str(corpus), tok=str(tok))
    env = dict(os.environ, PYTHONPATH=str(Path(zephon.__file__).parents[1]))
    env.pop("ZEPHON_PROGRESS", None)
    master = slave = None
    try:
        if tty:
            master, slave = os.openpty()
            proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                                    stderr=slave, env=env)
            os.close(slave)
            chunks = []
            while True:  # the pty's EOF (EIO on Linux) comes when the child exits
                try:
                    data = os.read(master, 4096)
                except OSError:
                    break
                if not data:
                    break
                chunks.append(data)
            err = b"".join(chunks).decode(errors="replace")
            out = proc.communicate(timeout=120)[0].decode()
        else:
            proc = subprocess.run([sys.executable, "-c", script], capture_output=True,
                                  env=env, timeout=120)
            out, err = proc.stdout.decode(), proc.stderr.decode()
        assert proc.returncode == 0 and "rank done" in out, err
        return err, d
    finally:
        if master is not None:
            os.close(master)
        assert_rings_freed_and_stop(d)


def test_a_terminal_sees_a_progress_line_until_the_first_batch(tmp_path, slow_corpus):
    corpus, tok = slow_corpus
    err, d = _run_rank(tmp_path, corpus, tok, "tty", tty=True)
    lines = [x for x in re.split(r"[\r\n]", err) if x.strip()]
    waiting = [x for x in lines if x.startswith("zephon: waiting ")]
    assert waiting, err
    # Rewritten in place (carriage return, erase to end of line), saying what zephond does.
    assert "\rzephon: waiting " in err and "\x1b[K" in err, repr(err)
    assert any(re.search(r"for the first batch: (tokenizing \d+ files?|tokenized), "
                         r"[\d.]+ (B|KiB|MiB) so far", x) for x in waiting), waiting
    # The last line says how long it took, on a line of its own.
    assert re.search(r"\x1b\[Kzephon: first batch after [\d.]+ s\r?\n", err), repr(err)


def test_no_progress_line_on_a_pipe_or_when_silenced(tmp_path, slow_corpus):
    corpus, tok = slow_corpus
    piped, _ = _run_rank(tmp_path, corpus, tok, "pipe", tty=False)
    assert "zephon: waiting" not in piped and "first batch after" not in piped, piped
    silenced, _ = _run_rank(tmp_path, corpus, tok, "quiet", tty=True, silenced=True)
    assert "zephon: waiting" not in silenced and "first batch after" not in silenced, silenced


def test_progress_line_names_conversions_and_downloads_and_obeys_its_switches(monkeypatch):
    from zephon import progress
    first = {"conversions": {"tokenized_bytes": "1024"},
             "shard_cache": {"bytes_downloaded": "0"}}
    now = {"conversions": {"tokenized_bytes": str(1024 + 4 * 2**20), "active": 3},
           "shard_cache": {"bytes_downloaded": str(8 * 2**20)}}
    assert progress.describe(first, now, 2.0) == (
        "tokenizing 3 files, 4.0 MiB so far (2.0 MiB/s); "
        "downloaded 8.0 MiB from the object store (4.0 MiB/s)")
    assert progress.describe(first, first, 1.0) == "zephond is preparing the pipeline"

    class Tty:
        def isatty(self):
            return True
    monkeypatch.delenv("ZEPHON_PROGRESS", raising=False)
    assert progress.enabled(None, Tty())
    assert not progress.enabled(False, Tty())
    assert not progress.enabled(None, open(os.devnull, "w"))
    monkeypatch.setenv("ZEPHON_PROGRESS", "0")
    assert not progress.enabled(True, Tty())
    with pytest.raises(zephon.InvalidOptionError, match="progress='no'"):
        text_pipeline(Path("/nonexistent"), "tok.json", progress="no")
