"""Harness: upstream's elastic-continuation integration test, unchanged, against our
package and zephond (issue 17, "done when" item 1).

What is here
------------
``upstream/`` holds, byte for byte as upstream has them (datologyai/zephon, stored
version 65e404a24df2bdd54e116034a3335c7d013b9326 of the test, 24556967b4842dc8d6940e89fd9d1ee7aab3f701
of the conftest):

- ``upstream/integration/test_elastic_continuation.py`` (sha256 ad369ad1...)
- ``upstream/conftest.py`` (sha256 bab38bb9...): its ``--run-integration`` flag and
  ``integration`` marker; without the flag every test here is skipped, as upstream's.

``test_vendored_files_are_unchanged`` (test_harness.py) pins both hashes: never edit them
to make a test pass. This file is ours.

What the harness supplies
-------------------------
- One single-node zephond for the session on a private socket; ``ZEPHON_SOCKET`` names
  it (the test never passes ``daemon=``).
- ``ZEPHON_RUN_ID``, unique per test: upstream defaults ``run_id`` for a multi-rank
  pipeline, we require one (the guide: a run_id unique to the training run, so jobs
  sharing an aggregate_dir never collide; the README lists this difference). Our client
  takes ``$ZEPHON_RUN_ID`` when ``world_size > 1`` and no run_id is given, as a launcher
  would set it. Only ``test_scale_down_equivalence_truth_checkpnts`` needs it.

Excluded cases (each marked here with its reason, never edited in the test file):
- ``test_checkpoint_records_inflight_pruned``: reads upstream's private engine-state
  schema (``ckpt["inflight"]``, ``ckpt["progress"][lane]["chunk_id"]``). Our checkpoint
  is an opaque, versioned byte string (``zephon.inspect_checkpoint`` decodes it); it
  has no in-flight chunk set, because a lane's position is (flush group, records into
  it) and nothing in flight is ever part of it.

Run: ``PYTHONPATH=client/python python3 -m pytest -q tests/upstream_elastic/upstream
--run-integration`` (``make test`` does).
"""
from __future__ import annotations

import gc
import hashlib
import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
sys.path.insert(0, str(ROOT / "client" / "python"))

from zephond_process import default_daemon  # noqa: E402

EXCLUDED = {
    "test_checkpoint_records_inflight_pruned":
        "reads upstream's private engine-state schema (ckpt['inflight'], "
        "ckpt['progress'][lane]['chunk_id']); our checkpoint is opaque bytes with no "
        "in-flight chunk set (see tests/upstream_elastic/conftest.py)",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        reason = EXCLUDED.get(getattr(item, "originalname", item.name))
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=f"excluded: {reason}"))


@pytest.fixture(scope="session", autouse=True)
def zephond(tmp_path_factory):
    """One single-node zephond for the session; ZEPHON_SOCKET names it meanwhile."""
    with default_daemon(tmp_path_factory.mktemp("elastic-zephond")) as d:
        yield d


@pytest.fixture(autouse=True)
def run_id_per_test(request, monkeypatch):
    """A run_id unique to this test (and this harness run), as a launcher sets one."""
    digest = hashlib.sha256(f"{request.node.nodeid} {os.getpid()}".encode()).hexdigest()[:16]
    monkeypatch.setenv("ZEPHON_RUN_ID", f"elastic-{digest}")
    yield
    gc.collect()  # pipelines the test dropped detach now
