"""Shared by every test suite under tests/: each zephond the tests start (fixtures,
auto-started ones, README examples, upstream trainers) keeps its token and shard caches
under a directory of this pytest run, not the user's ~/.cache/zephon, so a test run
leaves no cache behind to slow the next daemon's start (its start-up scan)."""
from __future__ import annotations

import os
import shutil
import tempfile


def pytest_configure(config):
    config._zephon_cache_home = tempfile.mkdtemp(prefix="zephon-test-cache-")
    os.environ["XDG_CACHE_HOME"] = config._zephon_cache_home


def pytest_unconfigure(config):
    shutil.rmtree(getattr(config, "_zephon_cache_home", ""), ignore_errors=True)
