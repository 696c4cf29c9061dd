"""A real Prometheus (Debian's prometheus 2.42) for tests: started on a free loopback
port with a generated config that scrapes the given targets every second as
job="zephond" and loads deploy/prometheus/zephon-rules.yaml; queried over its HTTP API.
Every wait has a deadline."""
from __future__ import annotations

import json
import re
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    def __init__(self, binary: str, workdir: Path, targets: list[str], rules: str):
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        config = workdir / "prometheus.yml"
        # JSON is YAML: no YAML writer needed.
        config.write_text(json.dumps({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s",
                       "scrape_timeout": "900ms"},
            "rule_files": [rules],
            "scrape_configs": [{"job_name": "zephond",
                                "static_configs": [{"targets": targets}]}],
        }, indent=1))
        self.address = f"127.0.0.1:{free_port()}"
        self.log = workdir / "prometheus.log"
        self.proc = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'tsdb'}",
             f"--web.listen-address={self.address}", "--log.level=warn"],
            stdout=subprocess.DEVNULL, stderr=open(self.log, "w"))
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited ({self.proc.returncode}): "
                                   f"{self.log.read_text()}")
            try:
                if self._get("/-/ready")[0] == 200:
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"prometheus not ready within 30 s: {self.log.read_text()}")
            time.sleep(0.1)

    def _get(self, path: str) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(f"http://{self.address}{path}", timeout=10) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def api(self, path: str, **params) -> dict:
        """The `data` of an /api/v1 call; AssertionError with Prometheus's error otherwise."""
        code, body = self._get(f"/api/v1/{path}?{urllib.parse.urlencode(params)}")
        reply = json.loads(body)
        assert code == 200 and reply.get("status") == "success", \
            f"/api/v1/{path} {params}: HTTP {code}: {reply.get('errorType')}: {reply.get('error')}"
        return reply["data"]

    def query(self, promql: str) -> list[dict]:
        """An instant query's vector: [{"metric": {...}, "value": [ts, "v"]}, ...]."""
        data = self.api("query", query=promql)
        assert data["resultType"] == "vector", data
        return data["result"]

    def values(self, promql: str, key: str | None = None) -> dict:
        """{labels[key] (or the whole label set as a sorted tuple): float value}."""
        out = {}
        for s in self.query(promql):
            k = s["metric"].get(key) if key else tuple(sorted(s["metric"].items()))
            out[k] = float(s["value"][1])
        return out

    def wait_scraped_after(self, t: float, deadline_s: float = 30) -> None:
        """Waits until the newest scrape of every target started after Unix time `t`."""
        deadline = time.monotonic() + deadline_s
        while True:
            targets = self.api("targets")["activeTargets"]
            if targets and all(x["health"] == "up" and _unix(x["lastScrape"]) > t
                               for x in targets):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"no scrape after {t} within {deadline_s} s: {targets}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _unix(rfc3339: str) -> float:
    """Prometheus's lastScrape ("2026-12-03T23:41:02.123456789Z" or "...+01:00") as Unix
    seconds; Python's parser takes at most microseconds."""
    m = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$",
                 rfc3339)
    assert m, f"not an RFC 3339 time: {rfc3339!r}"
    zone = "+00:00" if m.group(3) == "Z" else m.group(3)
    base = datetime.fromisoformat(m.group(1) + zone)
    return base.timestamp() + float("0." + (m.group(2) or "0"))
