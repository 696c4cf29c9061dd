"""The PromQL of deploy/grafana/zephon-dashboard.json, with Grafana's variables and
macros replaced by what a query of every node and run over a short window would use, and
the metric names it selects."""
from __future__ import annotations

import json
import os
import re

from conftest import DASHBOARD, ROOT

# Grafana's macros and this dashboard's variables (All = ".*", its allValue).
SUBSTITUTIONS = {"$__rate_interval": "1m", "$__range": "1h", "$node": ".*", "$run": ".*"}
# Series Prometheus makes itself; every other name must be zephond's.
PROMETHEUS_OWN = {"up", "ALERTS"}


def load() -> dict:
    with open(DASHBOARD) as f:
        return json.load(f)


def _concrete(expr: str) -> str:
    for k in sorted(SUBSTITUTIONS, key=len, reverse=True):
        expr = expr.replace(k, SUBSTITUTIONS[k])
    assert "$" not in expr, f"an unknown variable in {expr!r}"
    return expr


def queries(dashboard: dict | None = None) -> dict[str, str]:
    """{"<panel title>/<refId>" (or "annotation/..."): concrete PromQL}."""
    d = dashboard or load()
    out = {}
    for p in d["panels"]:
        for t in p.get("targets", []):
            out[f"{p['title']}/{t['refId']}"] = _concrete(t["expr"])
    for a in d["annotations"]["list"]:
        if "expr" in a:
            out[f"annotation/{a['name']}"] = _concrete(a["expr"])
    for v in d["templating"]["list"]:
        if v["type"] == "query":  # label_values(<selector>, label): the selector is PromQL
            m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", v["query"]["query"])
            assert m, v["query"]
            out[f"variable/{v['name']}"] = _concrete(m.group(1))
    return out


def selected_names(expr: str) -> set[str]:
    """Metric names `expr` selects: identifiers followed by a selector or a range, or
    standing alone, that are not PromQL functions, keywords or label names."""
    stripped = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)          # label values
    stripped = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)",
                      " ", stripped)                               # label lists
    stripped = re.sub(r"\{[^}]*\}", "{}", stripped)                # matchers
    stripped = re.sub(r"\[[^\]]*\]", "[]", stripped)              # ranges
    stripped = re.sub(r"\b\d[\w.]*", " ", stripped)                 # numbers, durations
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", stripped):
        word = m.group(0)
        after = stripped[m.end():].lstrip()
        if after.startswith("(") or word in ("and", "or", "unless", "bool", "offset",
                                             "group_left", "group_right"):
            continue  # a function call or an operator
        names.add(word)
    return names


def exported_names() -> set[str]:
    """Every family zephond's /metrics can serve (daemon/metrics/daemon_metrics.cc's
    literals), histograms with their _bucket/_sum/_count series."""
    with open(os.path.join(ROOT, "daemon", "metrics", "daemon_metrics.cc")) as f:
        source = f.read()
    names = set(re.findall(r'"(zephon_[a-z0-9_]+)"', source))
    histograms = set(re.findall(r'Family\("(zephon_[a-z0-9_]+)",\s*"histogram"', source))
    for h in histograms:
        names |= {h + "_bucket", h + "_sum", h + "_count"}
    return names
