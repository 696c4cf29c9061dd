"""deploy/grafana/zephon-dashboard.json: a Grafana dashboard with node and run
variables, the panels the operators' view needs, queries that select only series
zephond exports (or Prometheus's own up and ALERTS), and PromQL that promtool parses.
(tests/ops/test_prometheus_scrape.py also runs every query against a live Prometheus.)"""
from __future__ import annotations

import json
import subprocess

import dashboard


def test_dashboard_has_node_and_run_variables_and_sane_panels():
    d = dashboard.load()
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    for name in ("node", "run"):
        assert variables[name]["type"] == "query" and variables[name]["multi"], name
        assert variables[name]["includeAll"] and variables[name]["allValue"] == ".*", name
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    titles = {p["title"] for p in d["panels"]}
    for needed in ("Batches released per instance", "Ring fill per instance",
                   "Reader lag per rank", "Round latency", "Rounds by result", "Token cache",
                   "Shard cache (s3:// datasets)", "S3 requests by operation",
                   "S3 retries and errors", "Tokenizer throughput"):
        assert needed in titles, needed
    for p in d["panels"]:
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24, p["title"]
        if p["type"] == "row":
            continue
        assert p["targets"], p["title"]
        assert p["datasource"]["uid"] == "${datasource}", p["title"]
        for t in p["targets"]:
            assert 'job="zephond"' in t["expr"] or t["expr"].startswith("ALERTS"), t["expr"]


def test_every_metric_the_dashboard_queries_is_one_zephond_exports():
    exported = dashboard.exported_names()
    assert "zephon_batches_released_total" in exported
    assert "zephon_checkpoint_round_seconds_bucket" in exported
    used = set()
    for where, expr in dashboard.queries().items():
        names = dashboard.selected_names(expr)
        assert names, f"{where}: no metric in {expr}"
        unknown = names - exported - dashboard.PROMETHEUS_OWN
        assert not unknown, f"{where} selects {sorted(unknown)}, which zephond does not export"
        used |= names
    # The panels the issue names read these.
    for name in ("zephon_ring_occupancy", "zephon_reader_lag_batches",
                 "zephon_checkpoint_rounds_total", "zephon_token_cache_hits_total",
                 "zephon_s3_errors_total", "zephon_tokenize_bytes_total"):
        assert name in used, name


def test_selected_names_sees_through_functions_and_labels():
    assert dashboard.selected_names(
        'sum by (le, instance) (rate(zephon_x_bucket{job="zephond",a=~"b.*"}[1m])) '
        '/ on (instance) group_left zephon_y') == {"zephon_x_bucket", "zephon_y"}


def _promtool_check(promtool, tmp_path, exprs: dict[str, str]):
    """promtool check rules of one recording rule per query: it parses the PromQL."""
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:q{i}", "expr": e} for i, e in enumerate(exprs.values())]}]}
    path = tmp_path / "dashboard-rules.yaml"
    path.write_text(json.dumps(rules))  # JSON is YAML
    return subprocess.run([promtool, "check", "rules", str(path)], capture_output=True,
                          text=True)


def test_promtool_parses_every_query(promtool, tmp_path):
    exprs = dashboard.queries()
    out = _promtool_check(promtool, tmp_path, exprs)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in out.stdout, out.stdout


def test_promtool_refuses_a_broken_query(promtool, tmp_path):
    out = _promtool_check(promtool, tmp_path, {"x": "sum by (instance (zephon_instances)"})
    assert out.returncode != 0
    assert "parse error" in (out.stdout + out.stderr)
