"""A progress line on stderr while a rank waits for its first batch.

The first attach of a large text corpus tokenizes it into the node's token cache, and
the first batches of an s3:// dataset download its index and blocks: minutes of a
silent trainer on a big corpus. When that first batch takes longer than
``FIRST_LINE_AFTER_S``, this shows what zephond is doing, on one line rewritten in place
every second (``zephon: waiting 12 s for the first batch: tokenizing 3 files, 412 MiB so
far (38 MiB/s)``), then a last line saying how long it took.

Only on an interactive stderr (a terminal): a log file or a pipe gets nothing.
``Pipeline.options(progress=False)`` or ``ZEPHON_PROGRESS=0`` silences it. The figures
come from zephond's status (the node's text conversions and shard cache downloads, the
same ones `zephonctl status`/`top` and /metrics show), read once a second, each read
under its own short deadline: a slow or absent daemon makes the line say so, never
delays the batch."""
from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from typing import Any, Callable, Optional, TextIO

FIRST_LINE_AFTER_S = 3.0
EVERY_S = 1.0


def enabled(option: Any, stream: TextIO) -> bool:
    """Whether to show progress: not silenced by the option or $ZEPHON_PROGRESS=0, and
    `stream` is a terminal."""
    if option is False or os.environ.get("ZEPHON_PROGRESS", "").strip() == "0":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed or replaced by an object without it
        return False


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def describe(first: dict[str, Any], now: dict[str, Any], seconds: float) -> str:
    """What zephond did between two statuses `seconds` apart, for people."""
    parts = []
    conv = now.get("conversions") or {}
    conv0 = first.get("conversions") or {}
    tokenized = int(conv.get("tokenized_bytes", 0)) - int(conv0.get("tokenized_bytes", 0))
    active = int(conv.get("active", 0))
    if active or tokenized > 0:
        what = f"tokenizing {active} file{'s' if active != 1 else ''}" if active \
            else "tokenized"
        rate = f" ({_bytes(tokenized / seconds)}/s)" if seconds > 0 and tokenized > 0 else ""
        parts.append(f"{what}, {_bytes(max(tokenized, 0))} so far{rate}")
    cache = now.get("shard_cache") or {}
    cache0 = first.get("shard_cache") or {}
    downloaded = int(cache.get("bytes_downloaded", 0)) - int(cache0.get("bytes_downloaded", 0))
    if downloaded > 0:
        rate = f" ({_bytes(downloaded / seconds)}/s)" if seconds > 0 else ""
        parts.append(f"downloaded {_bytes(downloaded)} from the object store{rate}")
    return "; ".join(parts) if parts else "zephond is preparing the pipeline"


class FirstBatchProgress:
    """Shows the line while the first batch is awaited: start() before attaching,
    stop() once the first batch is in hand (or the wait failed). A daemon thread of its
    own sleeps until the line is due: a quick first batch costs a thread start, which
    the caller skips altogether where progress is off (see enabled())."""

    def __init__(self, status: Callable[[], dict[str, Any]], stream: TextIO = sys.stderr,
                 first_line_after_s: Optional[float] = None,
                 every_s: Optional[float] = None) -> None:
        self._status = status
        self._stream = stream
        # The module's values when not given, read now (tests and users may change them).
        self._after = FIRST_LINE_AFTER_S if first_line_after_s is None else first_line_after_s
        self._every = EVERY_S if every_s is None else every_s
        self._done = threading.Event()
        # Writes and the end of the line: a status read in flight when stop() comes must
        # not write after the last line (stop() does not wait for that read).
        self._lock = threading.Lock()
        self._started = 0.0
        self._shown = False
        self._thread: Optional[threading.Thread] = None

    def start(self) -> "FirstBatchProgress":
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="zephon-progress", daemon=True)
        self._thread.start()
        return self

    def stop(self, ok: bool = True) -> None:
        """Ends the line (with how long the wait took, if a line was shown). Never waits
        for the thread: it may be in a status read, and exits without writing."""
        with self._lock:
            if self._done.is_set():
                return  # stopped before: one last line only
            self._done.set()
            if self._shown:
                took = time.monotonic() - self._started
                end = f"first batch after {took:.1f} s" if ok else f"gave up after {took:.1f} s"
                self._write(f"\r\x1b[Kzephon: {end}\n")
        self._thread = None

    def _poll(self) -> Optional[dict[str, Any]]:
        try:
            return self._status()
        except Exception:  # noqa: BLE001 - a daemon still starting, or gone: say so
            return None

    def _run(self) -> None:
        if self._done.wait(self._after):
            return
        first = self._poll() or {}
        first_at = time.monotonic()
        while not self._done.is_set():
            now = self._poll()
            waited = time.monotonic() - self._started
            what = ("zephond does not answer yet" if now is None
                    else describe(first, now, time.monotonic() - first_at))
            line = f"zephon: waiting {waited:.0f} s for the first batch: {what}"
            width = shutil.get_terminal_size((100, 24)).columns
            with self._lock:
                if self._done.is_set():
                    return
                self._write("\r" + line[: max(20, width - 1)] + "\x1b[K")
                self._shown = True
            self._done.wait(self._every)

    def _write(self, text: str) -> None:
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):  # stderr closed under us: nothing left to tell
            pass
