"""Fixtures for tests/s3: a local s3rver and the AWS_* environment pointing at it."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e"))  # zephond_process, ...

from s3rver import Server  # noqa: E402


@pytest.fixture
def server(monkeypatch):
    """A fresh s3rver with bucket s3rver.BUCKET; AWS_* point at it for this test."""
    srv = Server()
    monkeypatch.setenv("AWS_ENDPOINT_URL", srv.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "S3RVER")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "S3RVER")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    yield srv
    srv.stop()
