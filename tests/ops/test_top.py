"""`zephonctl top` against a live zephond, driven like a person would: in a real
terminal (tmux: new-session, send-keys, capture-pane). It shows the instance, its ranks
and their lag, batches/s and a ring fill bar; it refreshes in place (a rank attaching
later appears without a key press); `q` quits with status 0; a 40-column terminal gets
40-column lines; NO_COLOR gets no colour. Piped, it prints one plain frame."""
from __future__ import annotations

import os
import re
import subprocess
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

import zephon
from zephond_process import Daemon, zephonctl_path


def write_corpus(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    docs = [np.arange(i, i + 50, dtype=np.int32) % 30000 for i in range(300)]
    zephon.write_megatron_dataset(root / "shard-0", docs, dtype=np.uint16)
    return root


def make_pipe(corpus: Path, socket: str, rank: int) -> zephon.Pipeline:
    ds = zephon.Dataset.from_path("web", str(corpus), fmt="megatron")
    ws = zephon.StaticMixtureWorkSource([ds], seed=3, chunk_size=16, exhausted_policy="repeat")
    return (zephon.Pipeline(ws).pack_flat(max_length=33).batch(2)
            .options(daemon=socket, run_id="top-run", world_size=2, global_rank=rank,
                     dp_degree=1, dp_group_id=0, local_peers=2, prefetch_batches=8,
                     aggregate_dir=str(corpus.parent / "agg")))


class Tmux:
    """A private tmux server (its own -L socket) with one session running `command`."""

    def __init__(self, tmux: str, command: list[str], width: int, height: int = 30,
                 env: dict | None = None):
        self.tmux = tmux
        self.server = f"zt-{uuid.uuid4().hex[:8]}"
        exports = " ".join(f"{k}={v}" for k, v in (env or {}).items())
        line = " ".join(command)
        self.run("new-session", "-d", "-s", "top", "-x", str(width), "-y", str(height),
                 f"env {exports} {line}" if exports else line)
        # Keep the pane after the command exits, to read its exit status.
        self.run("set-option", "-t", "top", "remain-on-exit", "on")

    def run(self, *args: str) -> str:
        out = subprocess.run([self.tmux, "-L", self.server, "-f", "/dev/null", *args],
                             capture_output=True, text=True, timeout=10)
        assert out.returncode == 0, f"tmux {args}: {out.stderr}"
        return out.stdout

    def screen(self, escapes: bool = False) -> str:
        return self.run("capture-pane", "-p", *(["-e"] if escapes else []), "-t", "top")

    def wait_for(self, pattern: str, deadline_s: float = 20) -> str:
        deadline = time.monotonic() + deadline_s
        while True:
            text = self.screen()
            if re.search(pattern, text):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"no {pattern!r} on the screen within {deadline_s} s:\n{text}")
            time.sleep(0.1)

    def pane(self, fmt: str) -> str:
        return self.run("display-message", "-p", "-t", "top", fmt).strip()

    def kill(self) -> None:
        subprocess.run([self.tmux, "-L", self.server, "kill-server"], capture_output=True,
                       timeout=10)


@pytest.fixture
def node(tmp_path):
    corpus = write_corpus(tmp_path / "corpus")
    d = Daemon(tmp_path / "node")
    pipes = []
    yield d, corpus, pipes
    for p in pipes:
        p.close()
    d.stop()


def top_command(d: Daemon, *extra: str) -> list[str]:
    return [zephonctl_path(), "top", "--socket", d.socket, "--interval-s", "0.3", *extra]


def test_top_shows_the_node_refreshes_and_quits_on_q(node, tmux):
    d, corpus, pipes = node
    pipes.append(make_pipe(corpus, d.socket, 0))
    it = iter(pipes[0])
    for _ in range(3):
        next(it)
    term = Tmux(tmux, ["sh", "-c", "'" + " ".join(top_command(d)) +
                       "; echo top exited $?'"], width=110)
    try:
        text = term.wait_for(r"rank 0 .*lag")
        assert "zephonctl top" in text and d.socket in text
        assert re.search(r"zephond pid \d+", text), text
        assert "top-run" in text and "INSTANCE" in text and "RING FILL" in text
        assert re.search(r"\[[#.]+\] \d+/8", text), text
        assert "checkpoint rounds  ok 0" in text and "last: none yet" in text
        # A rank that attaches now appears on the next refresh, with no key pressed.
        pipes.append(make_pipe(corpus, d.socket, 1))
        next(iter(pipes[1]))
        text = term.wait_for(r"rank 1 .*lag")
        assert len(re.findall(r"^\s+rank \d", text, re.M)) == 2, text
        assert term.pane("#{?pane_dead,dead,alive}") == "alive"
        term.run("send-keys", "-t", "top", "q")
        # The shell around top prints its exit status once top left the alternate
        # screen: the terminal is back to normal and top exited 0.
        # (tmux sometimes shows its own "Pane is dead (status N" instead of the echo.)
        text = term.wait_for(r"top exited \d+|Pane is dead \(status \d+", deadline_s=10)
        assert "top exited 0" in text or "Pane is dead (status 0" in text, text
        assert "INSTANCE" not in text, "the view was left on the normal screen"
    finally:
        term.kill()


def test_top_in_a_narrow_terminal_without_colour(node, tmux):
    d, corpus, pipes = node
    pipes.append(make_pipe(corpus, d.socket, 0))
    next(iter(pipes[0]))
    plain = Tmux(tmux, top_command(d), width=40, env={"NO_COLOR": "1"})
    coloured = Tmux(tmux, top_command(d), width=100)
    try:
        text = plain.wait_for(r"rank 0")
        lines = text.splitlines()
        assert all(len(line) <= 40 for line in lines), text
        # Cut, not wrapped: every rank line starts a row of its own.
        assert re.search(r"^  rank 0 ", text, re.M), text
        assert "\x1b[7m" not in plain.screen(escapes=True)
        coloured.wait_for(r"rank 0")
        assert "\x1b[7m" in coloured.screen(escapes=True)  # the title bar, reversed
    finally:
        plain.kill()
        coloured.kill()


def test_top_piped_prints_one_plain_frame(node):
    d, corpus, pipes = node
    pipes.append(make_pipe(corpus, d.socket, 0))
    next(iter(pipes[0]))
    out = subprocess.run(top_command(d), capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "top-run" in out.stdout and "rank 0" in out.stdout
    assert "\x1b" not in out.stdout
    gone = subprocess.run([zephonctl_path(), "top", "--once", "--socket",
                           d.socket + ".absent", "--timeout-s", "2"],
                          capture_output=True, text=True, timeout=30)
    assert gone.returncode == 4, gone.stdout + gone.stderr  # unreachable
    assert "zephonctl top: " in gone.stderr and d.socket + ".absent" in gone.stderr, gone.stderr
