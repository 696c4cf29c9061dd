"""zephond's operations surface: the Prometheus endpoint (/metrics, /healthz, /readyz),
the status fields behind it, and --config files."""
from __future__ import annotations

import re
import signal
import subprocess
import time
import urllib.error
import urllib.request

import pytest

import zephon
from zephon import _native

from conftest import Daemon, pipeline


def _get(address: str, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://{address}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _value(text: str, name: str, **labels) -> float:
    """The value of the one sample of `name` whose labels include `labels`."""
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        found = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        if all(found.get(k) == str(v) for k, v in labels.items()):
            return float(m.group(4))
    raise AssertionError(f"no sample {name}{labels} in:\n{text}")


def test_metrics_health_and_ready_follow_the_daemon(tmp_path, corpus):
    d = Daemon(tmp_path, ["--metrics-address", "127.0.0.1:0"])
    try:
        status = zephon.daemon_status(d.socket)
        address = status["metrics_address"]
        assert re.match(r"^127\.0\.0\.1:\d+$", address), status
        assert f"metrics on http://{address}/metrics" in d.log.read_text()
        assert _get(address, "/healthz")[0] == 200
        assert _get(address, "/readyz")[0] == 200

        pipe = pipeline(corpus, d.socket, run_id="metrics-run", prefetch_batches=4)
        read = 0
        for _ in pipe:
            read += 1
            if read == 6:
                break
        time.sleep(0.3)  # a few ticks: the released rate needs two samples
        code, text = _get(address, "/metrics")
        assert code == 200
        assert "# TYPE zephon_batches_produced_total counter" in text
        produced = _value(text, "zephon_batches_produced_total", run="metrics-run", dp_group=0)
        released = _value(text, "zephon_batches_released_total", run="metrics-run", dp_group=0)
        # The client releases a batch when it takes the next one.
        assert produced >= released >= read - 1
        # The old name is a deprecated alias for one release: same value, HELP says so.
        assert _value(text, "zephon_batches_delivered_total", run="metrics-run",
                      dp_group=0) == released
        assert "# HELP zephon_batches_delivered_total Deprecated alias of " \
               "zephon_batches_released_total" in text
        assert _value(text, "zephon_readers_attached", run="metrics-run") == 1
        assert _value(text, "zephon_ring_slots", run="metrics-run") == 4
        assert _value(text, "zephon_ring_occupancy", run="metrics-run") == produced - released
        assert _value(text, "zephon_reader_lag_batches", run="metrics-run", rank=0) >= 0
        assert _value(text, "zephon_attach_total", result="ok") >= 1
        assert _value(text, "zephon_instances") == 1
        assert _value(text, "zephon_shm_free_bytes") > 0
        assert _value(text, "zephon_process_cpu_seconds_total") > 0
        assert _value(text, "zephon_checkpoint_round_seconds_count") == 0
        assert _value(text, "zephon_errors_total", kind="reader_died") == 0

        inst = zephon.daemon_status(d.socket)["instances"][0]
        assert inst["readers_attached"] == 1
        assert int(inst["ring_occupancy"]) == int(inst["produced"]) - int(inst["released"])
        assert "released_per_s" in inst and inst["released_per_s"] >= 0
        assert all("lag" in r for r in inst["readers"])
        pipe.close()
        assert _get(address, "/nope")[0] == 404
    finally:
        rc = d.stop()
    assert rc == 0, d.log.read_text()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://{address}/healthz", timeout=2)


def test_metrics_can_be_disabled(tmp_path):
    d = Daemon(tmp_path, ["--metrics-address", ""])
    try:
        assert zephon.daemon_status(d.socket)["metrics_address"] == ""
    finally:
        assert d.stop() == 0


def test_config_file_sets_flags_and_command_line_wins(tmp_path):
    config = tmp_path / "zephond.toml"
    config.write_text('# zephond settings\nworker-threads = 3\nprefetch-batches = 4\n'
                      'metrics-address = ""\n')
    d = Daemon(tmp_path, ["--config", str(config), "--worker-threads", "2"])
    try:
        status = zephon.daemon_status(d.socket)
        assert status["worker_threads"] == 2          # the command line overrides the file
        assert status["metrics_address"] == ""        # taken from the file
    finally:
        assert d.stop() == 0


def test_config_file_with_an_unknown_key_is_refused(tmp_path):
    config = tmp_path / "zephond.toml"
    config.write_text("worker-threads = 1\nno-such-flag = 7\n")
    proc = subprocess.run([_native.zephond_path(), "--config", str(config), "--socket",
                           str(tmp_path / "z.sock")], capture_output=True, text=True, timeout=15)
    assert proc.returncode == 2
    assert "no-such-flag" in proc.stderr


def test_unknown_log_level_is_refused(tmp_path):
    proc = subprocess.run([_native.zephond_path(), "--log-level", "loud", "--socket",
                           str(tmp_path / "z.sock")], capture_output=True, text=True, timeout=15)
    assert proc.returncode == 2
    assert "--log-level" in proc.stderr
