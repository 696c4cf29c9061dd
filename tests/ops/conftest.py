"""Fixtures for tests/ops (the operators' view: alert rules, a real Prometheus scrape,
the Grafana dashboard, `zephonctl top`): Debian's promtool/prometheus and tmux, found
or the test skipped saying how to get them (`make setup-ops`)."""
from __future__ import annotations

import os
import shutil
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e"))  # zephond_process, ...

RULES = os.path.join(ROOT, "deploy", "prometheus", "zephon-rules.yaml")
DASHBOARD = os.path.join(ROOT, "deploy", "grafana", "zephon-dashboard.json")


def _tool(name: str, package: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} not found: Debian package '{package}' is not installed "
                    "(as root, `make setup-ops` installs it)")
    return path


@pytest.fixture
def promtool() -> str:
    return _tool("promtool", "prometheus")


@pytest.fixture
def prometheus_bin() -> str:
    return _tool("prometheus", "prometheus")


@pytest.fixture
def tmux() -> str:
    return _tool("tmux", "tmux")
