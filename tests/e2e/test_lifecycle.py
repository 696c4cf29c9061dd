"""Closed Pipelines free everything (issue 12 section 4): the ring mapping, the connection
to zephond, the daemon's instance, its fds and its shm segment, at once on close() and on
`del` + gc.collect(), over hundreds of attach/read/close cycles from one process.

Resources are counted through /proc, which sees POSIX shm segments and memfds alike."""
from __future__ import annotations

import gc
import os
import time

import numpy as np
import pytest

from conftest import pipeline

# Cycles per mode: "del" pays a full gc.collect() per cycle (~60 ms in a test process),
# so it runs fewer; a leak of one fd, mapping or instance per cycle shows in either.
CYCLES = {"close": 500, "del": 150}
# Constant slack: gRPC's first channel starts its own threads and an epoll fd or two.
FD_SLACK = 4
RSS_SLACK_BYTES = 48 << 20


def _fds(pid: int | str = "self") -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _ring_mapped_bytes() -> int:
    """Bytes of this process's address space mapped from shm segments or memfds."""
    total = 0
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            path = " ".join(fields[5:]) if len(fields) > 5 else ""
            if path.startswith("/dev/shm/") or path.startswith("/memfd:"):
                start, end = (int(x, 16) for x in fields[0].split("-"))
                total += end - start
    return total


def _rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def _daemon_ring_bytes(daemon) -> int:
    """Ring memory the daemon still holds: the sizes of its open ring memfds (fds it closes
    while this looks are skipped), plus any /dev/shm segment of its prefix (there should be
    none: a layout-1 leftover would count too)."""
    legacy = 0
    for name in daemon.legacy_shm_segments():
        try:
            legacy += os.path.getsize(f"/dev/shm/{name}")
        except FileNotFoundError:
            pass
    return daemon.ring_memfd_bytes() + legacy


def _snapshot(daemon) -> dict:
    return {"fds": _fds(), "daemon_fds": _fds(daemon.proc.pid), "mapped": _ring_mapped_bytes(),
            "daemon_ring": _daemon_ring_bytes(daemon), "rss": _rss_bytes(),
            "instances": len(daemon.status().get("instances", []))}


def _settled(daemon, baseline: dict, deadline_s: float = 10) -> dict:
    """The snapshot once the daemon has finished tearing down what the client left (its
    side of a detach is asynchronous), or the last one after `deadline_s`."""
    deadline = time.monotonic() + deadline_s
    while True:
        now = _snapshot(daemon)
        if (now["daemon_fds"] <= baseline["daemon_fds"] + FD_SLACK and now["instances"] == 0
                and now["daemon_ring"] == 0) or time.monotonic() > deadline:
            return now
        time.sleep(0.1)


def _assert_back_to_baseline(baseline: dict, after: dict, what: str) -> None:
    report = f"{what}: baseline {baseline}, after {CYCLES[what]} cycles {after}"
    assert after["fds"] <= baseline["fds"] + FD_SLACK, "client fds leaked; " + report
    assert after["daemon_fds"] <= baseline["daemon_fds"] + FD_SLACK, "zephond fds leaked; " + report
    assert after["mapped"] == 0, "ring mappings leaked in the client; " + report
    assert after["daemon_ring"] == 0, "zephond still holds ring memory; " + report
    assert after["instances"] == 0, "zephond kept instances without readers; " + report
    assert after["rss"] <= baseline["rss"] + RSS_SLACK_BYTES, "client RSS grew; " + report


def _one_cycle(corpus, daemon, how: str) -> None:
    p = pipeline(corpus, daemon.socket, max_length=17, microbatch=2, prefetch_batches=2)
    batch = next(iter(p))
    assert batch["tokens"].shape == (2, 17)
    assert _daemon_ring_bytes(daemon) > 0, "the measure sees no ring while one is attached"
    if how == "close":
        p.close()
        del batch, p
    else:
        del batch, p
        gc.collect()


@pytest.mark.parametrize("how", ["close", "del"])
def test_attach_read_close_cycles_return_to_baseline(corpus, daemon, how):
    gc.collect()
    _one_cycle(corpus, daemon, how)  # warm up: gRPC's process-wide threads and fds
    baseline = _settled(daemon, _snapshot(daemon))
    assert (baseline["mapped"] == 0 and baseline["instances"] == 0
            and baseline["daemon_ring"] == 0), baseline
    for _ in range(CYCLES[how]):
        _one_cycle(corpus, daemon, how)
    after = _settled(daemon, baseline)
    _assert_back_to_baseline(baseline, after, how)


def test_close_frees_the_ring_at_once_without_gc(corpus, daemon):
    """No reliance on the cycle collector: close() alone unmaps and disconnects."""
    p = pipeline(corpus, daemon.socket, max_length=17, microbatch=2, prefetch_batches=2)
    next(iter(p))
    assert _ring_mapped_bytes() > 0
    gc.disable()
    try:
        p.close()
        assert _ring_mapped_bytes() == 0, "close() left the ring mapped"
    finally:
        gc.enable()


def test_arrays_kept_after_close_stay_valid_then_free_the_ring(corpus, daemon):
    """A batch's array (a view of the ring) keeps the mapping, never the lease: reading
    it after close() is safe (its bytes may be a later batch's: the slot was released),
    and the ring is unmapped when the last such array goes."""
    p = pipeline(corpus, daemon.socket, max_length=17, microbatch=2, prefetch_batches=2)
    batch = next(iter(p))
    tokens = batch["tokens"]
    p.close()
    assert _settled(daemon, _snapshot(daemon))["instances"] == 0, "the lease outlived close()"
    assert int(np.asarray(tokens, dtype=np.int64).sum()) >= 0  # still mapped: no SIGSEGV
    assert _ring_mapped_bytes() > 0
    del tokens, batch
    assert _ring_mapped_bytes() == 0, "the ring stayed mapped after its last array went"


# Lanes that make the first batch slow: the stream skips exhausted lanes one by one, and
# a 200-document corpus leaves most of 20,000 lanes empty (~6 s of one core before the first
# batch). If --canonical_replicas gets an upper bound below this, lower it to the bound.
SLOW_LANES = 20_000


def test_work_stops_and_ring_goes_when_the_last_reader_leaves(tmp_path, daemon):
    """The reader gives up before its first batch and closes: the daemon stops working
    for it at once (no core kept busy), drops the instance and removes its ring."""
    import zephon
    from zephon.corpus import synthetic_documents
    small = tmp_path / "small"
    small.mkdir()
    zephon.write_megatron_dataset(small / "shard-0", synthetic_documents(200, seed=11),
                                  dtype=np.uint16)
    p = pipeline(small, daemon.socket, seed=1, max_length=17, microbatch=2,
                 prefetch_batches=2, canonical_replicas=SLOW_LANES, read_timeout_s=1)
    with pytest.raises(zephon.ZephonTimeoutError):
        for _ in p:  # the few lanes with data come quickly; then the long skip
            pass
    p.close()
    deadline = time.monotonic() + 2  # the daemon sees the detach asynchronously
    while daemon.status().get("instances") and time.monotonic() < deadline:
        time.sleep(0.05)
    cpu_before = daemon.cpu_s()
    time.sleep(2)
    busy_s = daemon.cpu_s() - cpu_before
    assert busy_s < 0.5, f"zephond used {busy_s:.2f} s of CPU in 2 s after its last reader left"
    after = _snapshot(daemon)
    assert after["instances"] == 0 and after["daemon_ring"] == 0, after
