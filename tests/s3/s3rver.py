"""Shared helpers for the tests against a local S3-protocol server (s3rver).

`Server` runs s3rver (npm, tests/s3/node_modules; `make setup-s3`) on a free loopback
port with one bucket; `tool` runs bazel-bin/daemon/storage/s3_tool; `node` runs the
independent AWS SDK client (s3client.mjs). The `server` fixture (conftest.py) starts a
server and points the standard AWS_* variables at it.
"""
import http.server
import os
import shutil
import socket
import subprocess
import tempfile
from datetime import datetime, timezone
import threading
import time
from contextlib import contextmanager

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
S3RVER = os.path.join(HERE, "node_modules", ".bin", "s3rver")
CLIENT = os.path.join(HERE, "s3client.mjs")
TOOL = os.path.join(ROOT, "bazel-bin", "daemon", "storage", "s3_tool")
BUCKET = "zephon-test"

REQUIRES_S3RVER = [
    pytest.mark.skipif(not os.path.exists(S3RVER),
                       reason="s3rver not installed: run `make setup-s3` "
                              "(npm install --prefix tests/s3)"),
    pytest.mark.skipif(shutil.which("node") is None, reason="node (Node.js) not found"),
    pytest.mark.skipif(not os.path.exists(TOOL),
                       reason="s3_tool not built: run `bazel build //daemon/storage:s3_tool`"),
]

# Tight limits so that failure cases finish fast: 3 attempts, 1 s connect, 3 s total.
FAST_FAIL = ["--attempts=3", "--connect-timeout-ms=1000", "--timeout-ms=3000"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, proc, timeout_s=20.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"s3rver exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"s3rver did not listen on port {port} within {timeout_s}s")


class Server:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="zephon-s3rver-")
        self.port = free_port()
        self.log = open(os.path.join(self.dir, "s3rver.log"), "wb")
        # s3rver 3.7 encrypts ListObjectsV2 continuation tokens with DES, which Node 17+
        # (OpenSSL 3) only offers through the legacy provider.
        env = {**os.environ, "NODE_OPTIONS": "--openssl-legacy-provider"}
        self.proc = subprocess.Popen(
            [S3RVER, "-d", os.path.join(self.dir, "data"), "-a", "127.0.0.1",
             "-p", str(self.port), "--silent", "--configure-bucket", BUCKET],
            stdout=self.log, stderr=subprocess.STDOUT, env=env)
        wait_listening(self.port, self.proc)
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def tool(*args, env=None, timeout=60):
    return subprocess.run([TOOL, *args], capture_output=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def node(*args):
    r = subprocess.run(["node", CLIENT, *args], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout.decode()


# Environment for s3_tool against a stub S3 at `endpoint`: fixed credentials, no shared
# files (a developer's ~/.aws must not leak in).
def stub_env(endpoint):
    return {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "K", "AWS_SECRET_ACCESS_KEY": "S",
            "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_CONFIG_FILE": "/nonexistent",
            "AWS_REGION": "us-east-1"}


@contextmanager
def serving(server):
    """Runs an http.server `server` (bound to 127.0.0.1:0) on a thread; on exit shuts it
    down, closes it and joins the thread (10 s at most)."""
    t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True)
    t.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        t.join(10)


class StubHandler(http.server.BaseHTTPRequestHandler):
    """Base of the stub S3 servers' request handlers: HTTP/1.1 keep-alive, a 30 s socket
    timeout, no request logging, and reply() for a whole answer."""

    protocol_version = "HTTP/1.1"
    timeout = 30

    def reply(self, status, body=b"", headers=None):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, *args):
        pass


def raw_request(method, port, key, extra_headers=None, body=b"", send_only=None):
    """One hand-made S3 request to s3rver on `port` (which checks only the access key id,
    not the signature): for what s3_tool never sends, such as a wrong Content-MD5.
    Returns (status, whole reply); with `send_only`, sends that many body bytes, hangs
    up and returns (None, b"")."""
    now = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    headers = {
        "Host": f"127.0.0.1:{port}",
        "Authorization": f"AWS4-HMAC-SHA256 Credential=S3RVER/{now[:8]}/us-east-1/s3/"
                         "aws4_request, SignedHeaders=host, Signature=00",
        "x-amz-date": now, "x-amz-content-sha256": "UNSIGNED-PAYLOAD",
        **({"Content-Length": str(len(body))} if body or method == "PUT" else {}),
        "Connection": "close", **(extra_headers or {})}
    head = f"{method} /{BUCKET}/{key} HTTP/1.1\r\n" + "".join(
        f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(head.encode() + (body if send_only is None else body[:send_only]))
        if send_only is not None:
            return None, b""
        reply = b""
        while chunk := s.recv(65536):
            reply += chunk
    return int(reply.split(b" ", 2)[1]), reply


class StubServer(http.server.ThreadingHTTPServer):
    """Base of the stub S3 servers: 127.0.0.1 on a free port, daemon handler threads,
    requests handled by `handler` (a StubHandler subclass). Subclasses set their own
    state before calling StubServer.__init__."""

    daemon_threads = True

    def __init__(self, handler):
        super().__init__(("127.0.0.1", 0), handler)
