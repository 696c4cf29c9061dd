"""A real Prometheus (Debian's 2.42) scrapes a real zephond that serves two pipeline
instances (two DP groups of two ranks each, a JSONL text corpus tokenized into the token cache) and
ran two checkpoint rounds, one of them timed out. The series Prometheus stored are the
ones zephond served, with the values it served once the job went quiet; the alert rules
load and evaluate, and the timed-out round fires ZephonCheckpointRoundFailed."""
from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import dashboard
import zephon
from conftest import RULES
from prom import Prometheus
from zephond_process import Daemon, zephonctl_path

LINES = 400
ROOT = Path(__file__).resolve().parents[2]
WORLD, DP = 4, 2

# What the test compares between zephond's /metrics and Prometheus's store.
COMPARED = ["zephon_batches_produced_total", "zephon_batches_released_total",
            "zephon_ring_occupancy", "zephon_ring_slots", "zephon_readers_attached",
            "zephon_reader_lag_batches", "zephon_reader_waiting",
            "zephon_checkpoint_rounds_total", "zephon_checkpoint_round_seconds_count",
            "zephon_token_cache_bytes", "zephon_token_cache_hits_total",
            "zephon_token_cache_misses_total", "zephon_tokenize_bytes_total",
            "zephon_tokenize_files_total", "zephon_instances", "zephon_start_time_seconds"]


def write_text_corpus(path: Path) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for i in range(LINES):
            words = " ".join(["the quick brown fox", "jumps over", "a lazy dog"][j % 3]
                             for j in range(i % 7 + 3))
            f.write(json.dumps({"text": f"{i}: {words}"}) + "\n")


def write_tiny_tokenizer(path: Path) -> Path:
    """The tiny Llama 2 style tokenizer.json the C++ and e2e tests share."""
    header = (ROOT / "tokenizer" / "tiny_tokenizer_testing.h").read_text(encoding="utf-8")
    path.write_text(re.search(r'R"json\((.*)\)json"', header, re.S).group(1),
                    encoding="utf-8")
    return path


def scrape(address: str) -> dict:
    """zephond's /metrics as {(name, frozenset(labels)): value}."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$", line)
        assert m, line
        labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def stored(prom: Prometheus, name: str) -> dict:
    """Prometheus's newest samples of `name` as scrape() keys them (job/instance off)."""
    out = {}
    for s in prom.query(name):
        labels = {k: v for k, v in s["metric"].items() if k not in ("__name__", "job", "instance")}
        out[(name, frozenset(labels.items()))] = float(s["value"][1])
    return out


def quiet(address: str, deadline_s: float = 20) -> dict:
    """Waits until zephond's rings are full and nothing moves (two scrapes 1 s apart agree
    on every compared series); returns that scrape."""
    deadline = time.monotonic() + deadline_s
    before = None
    while True:
        now = {k: v for k, v in scrape(address).items() if k[0] in COMPARED}
        if now == before:
            return now
        if time.monotonic() > deadline:
            raise AssertionError(f"zephond's figures still move after {deadline_s} s")
        before = now
        time.sleep(1)


@pytest.fixture
def job(tmp_path):
    """zephond with /metrics on loopback and the 4 ranks of a dp=2 run on it."""
    corpus = tmp_path / "corpus.jsonl"
    write_text_corpus(corpus)
    tokenizer = write_tiny_tokenizer(tmp_path / "tokenizer.json")
    d = Daemon(tmp_path / "node", ["--metrics-address", "127.0.0.1:0"])
    pipes = []
    try:
        ds = zephon.Dataset.from_path("text", str(corpus), fmt="jsonl")
        for rank in range(WORLD):
            ws = zephon.StaticMixtureWorkSource([ds], seed=5, chunk_size=16,
                                                exhausted_policy="repeat")
            pipes.append(zephon.Pipeline(ws).tokenize(str(tokenizer)).pack_flat(max_length=33)
                         .batch(2).options(
                daemon=d.socket, world_size=WORLD, global_rank=rank, dp_degree=DP,
                dp_group_id=rank // (WORLD // DP), local_peers=WORLD // DP, run_id="ops-run",
                aggregate_dir=str(tmp_path / "agg"), aggregate_timeout_s=3,
                prefetch_batches=4))
        yield d, pipes
    finally:
        for p in pipes:
            p.close()
        d.stop()


def test_prometheus_stores_what_zephond_serves(job, prometheus_bin, tmp_path):
    d, pipes = job
    address = d.status()["metrics_address"]
    prom = Prometheus(prometheus_bin, tmp_path / "prom", [address], RULES)
    try:
        # Prometheus hands static targets to its scrapers up to 5 s after it is ready:
        # the counters' zeros must be stored before the job moves them.
        prom.wait_scraped_after(0)
        iters = [iter(p) for p in pipes]
        with ThreadPoolExecutor(WORLD) as pool:
            list(pool.map(lambda it: [next(it) for _ in range(5)], iters))
            list(pool.map(lambda p: p.checkpoint(), pipes))  # a round that succeeds
            # A round rank 3 never joins: it times out after aggregate_timeout_s.
            futures = [pool.submit(pipes[r].checkpoint) for r in range(WORLD - 1)]
            for f in futures:
                with pytest.raises(zephon.ZephonError):
                    f.result(timeout=60)
        served = quiet(address)
        # Two scrapes of the quiet figures: rates need two samples in their window.
        prom.wait_scraped_after(time.time())
        prom.wait_scraped_after(time.time())

        for name in COMPARED:
            want = {k: v for k, v in served.items() if k[0] == name}
            assert want, f"zephond served no {name}"
            assert stored(prom, name) == want, name

        # The series behind the dashboards, as Prometheus answers them.
        released = prom.values('zephon_batches_released_total{job="zephond"}', "dp_group")
        assert set(released) == {"0", "1"} and min(released.values()) >= 4, released
        ids = prom.values("zephon_readers_attached", "instance_id")
        assert len(ids) == 2 and set(ids.values()) == {2.0}, ids
        lag = prom.values("zephon_reader_lag_batches", "rank")
        assert set(lag) == {"0", "1", "2", "3"}, lag
        fill = prom.values("zephon_ring_occupancy / zephon_ring_slots", "dp_group")
        assert all(0 < v <= 1 for v in fill.values()), fill
        rounds = prom.values("zephon_checkpoint_rounds_total", "result")
        assert rounds == {"ok": 1.0, "error": 0.0, "timeout": 1.0}, rounds
        # zephonctl status says the same, and why the last round failed.
        ctl = subprocess.run([zephonctl_path(), "status", "--socket", d.socket],
                             capture_output=True, text=True, timeout=30)
        assert ctl.returncode == 0, ctl.stderr
        assert re.search(r"checkpoint rounds ok 1  error 0  timeout 1  last: run ops-run "
                         r"round \d+ timeout at .*: .*ranks \[3\]", ctl.stdout), ctl.stdout
        assert prom.values("zephon_token_cache_misses_total + zephon_token_cache_hits_total",
                           None) and \
            sum(prom.values("zephon_token_cache_bytes").values()) > 0
        assert sum(prom.values("zephon_tokenize_bytes_total").values()) > 0
        # Prometheus's own target label is the node; zephond's instance id is not
        # renamed (no exported_instance).
        sample = prom.query("zephon_reader_lag_batches")[0]["metric"]
        assert sample["instance"] == address and "exported_instance" not in sample, sample

        # Every query of the Grafana dashboard runs; those of the series this job made
        # return them.
        answers = {where: prom.api("query", query=expr)["result"]
                   for where, expr in dashboard.queries().items()}
        for where in ("Batches released per instance/A", "Batches produced per instance/A",
                      "Ring fill per instance/A", "Reader lag per rank/A",
                      "Ranks waiting for a batch/A", "Rounds by result/A", "Token cache/A",
                      "Token cache hit ratio/A", "Tokenizer throughput/A", "CPU/A",
                      "variable/node", "variable/run"):
            assert answers[where], f"dashboard query {where} returned nothing"
        assert len(answers["Reader lag per rank/A"]) == WORLD

        # The alert rules load and evaluate without errors; the timed-out round pages.
        groups = prom.api("rules")["groups"]
        rules = [r for g in groups for r in g["rules"]]
        assert len(rules) == 10, [r["name"] for r in rules]
        deadline = time.monotonic() + 20
        while True:
            firing = {(a["labels"]["alertname"], a["labels"].get("result"))
                      for a in prom.api("alerts")["alerts"] if a["state"] == "firing"}
            if ("ZephonCheckpointRoundFailed", "timeout") in firing:
                break
            assert time.monotonic() < deadline, f"no round alert; firing: {firing}"
            time.sleep(0.5)
        for r in prom.api("rules")["groups"][0]["rules"]:
            assert r["health"] == "ok", r
        assert ("ZephonDaemonDown", None) not in firing
    finally:
        prom.stop()
