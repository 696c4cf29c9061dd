"""S3Store when the server or the network fails mid-transfer (issue 8: "a server that
stops mid-transfer gives clear errors, no partial checkpoint").

s3_tool talks to s3rver through FaultProxy (fault_proxy.py), which cuts, drops, stalls,
corrupts or refuses connections on demand; the AWS SDK client (s3client.mjs) checks the
server's state directly, bypassing the proxy. Bounds on elapsed time are generous
"does not hang" limits, not performance assertions.

s3rver 3.7 differs from S3 in two ways these tests work around (pinned by
test_s3rver_fidelity_gaps): it ignores Content-MD5, so the BadDigest path runs against a
small digest-checking stub server; and it keeps the truncated body of an interrupted
PUT, so "nothing is stored" is asserted with DROP_REQUEST (the upload never reaches the
server, as with an S3 that discards it) while CUT_REQUEST only checks the client side.
"""
import base64
import hashlib
import os
import socket
import subprocess
import threading
import time
from contextlib import contextmanager

import pytest

from fault_proxy import (CORRUPT_REQUEST, CUT_REQUEST, CUT_RESPONSE, DROP_REQUEST, PASS,
                         REFUSE, STALL, FaultProxy)
from s3rver import (BUCKET, CLIENT, FAST_FAIL, REQUIRES_S3RVER, TOOL, node, raw_request,
                    serving, stub_env, StubHandler, StubServer, tool)


def requires_s3rver(test):
    for mark in REQUIRES_S3RVER:
        test = mark(test)
    return test


requires_tool = pytest.mark.skipif(
    not os.path.exists(TOOL),
    reason="s3_tool not built: run `bazel build //daemon/storage:s3_tool`")

BIG = 4 << 20  # large enough that a cut lands mid-body, far past the HTTP headers


@pytest.fixture
def proxy(server):
    p = FaultProxy(server.port)
    yield p
    p.stop()


def via(proxy):
    return {"AWS_ENDPOINT_URL": proxy.endpoint}


def node_head_rc(key):
    return subprocess.run(["node", CLIENT, "head", BUCKET, key], capture_output=True,
                          timeout=60).returncode


def timed_tool(*args, env):
    start = time.monotonic()
    r = tool(*args, env=env, timeout=60)
    return r, time.monotonic() - start


@requires_s3rver
def test_get_cut_once_mid_body_is_retried_and_returns_the_exact_bytes(server, proxy,
                                                                       tmp_path):
    data = os.urandom(BIG)
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    node("put", BUCKET, "ckpt/model.bin", str(src))
    proxy.set_fault(CUT_RESPONSE, after_bytes=BIG // 2, times=1)
    r = tool("get", f"s3://{BUCKET}/ckpt/model.bin", "-", env=via(proxy))
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout == data
    assert proxy.stats() == {"accepted": 2, "faulted": 1}


@requires_s3rver
def test_get_cut_on_every_attempt_fails_unavailable_naming_key_and_attempts(
        server, proxy, tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(BIG))
    node("put", BUCKET, "ckpt/model.bin", str(src))
    proxy.set_fault(CUT_RESPONSE, after_bytes=BIG // 2)
    r, elapsed = timed_tool(*FAST_FAIL, "get", f"s3://{BUCKET}/ckpt/model.bin", "-",
                            env=via(proxy))
    assert r.returncode == 1 and r.stdout == b""
    err = r.stderr.decode()
    assert "UNAVAILABLE" in err and f"s3://{BUCKET}/ckpt/model.bin" in err, err
    assert "after 3 attempts" in err, err
    assert "before the whole body arrived" in err and "curl 18" in err, err  # PARTIAL_FILE
    assert proxy.stats()["accepted"] == 3
    assert elapsed < 30, elapsed


@requires_s3rver
def test_put_dropped_mid_upload_fails_and_stores_nothing(server, proxy, tmp_path):
    src = tmp_path / "new.bin"
    src.write_bytes(os.urandom(BIG))
    proxy.set_fault(DROP_REQUEST, after_bytes=BIG // 4)
    r, elapsed = timed_tool(*FAST_FAIL, "put", str(src), f"s3://{BUCKET}/ckpt/new.bin",
                            env=via(proxy))
    assert r.returncode == 1
    err = r.stderr.decode()
    assert "UNAVAILABLE" in err and f"s3://{BUCKET}/ckpt/new.bin" in err, err
    assert "after 3 attempts" in err and "body bytes sent" in err, err
    assert elapsed < 30, elapsed
    assert proxy.stats() == {"accepted": 3, "faulted": 3}
    assert node_head_rc("ckpt/new.bin") == 3  # no such object, partial or whole


@requires_s3rver
def test_put_dropped_mid_upload_leaves_the_old_version_intact(server, proxy, tmp_path):
    old, new = os.urandom(100_000), os.urandom(BIG)
    (tmp_path / "old.bin").write_bytes(old)
    (tmp_path / "new.bin").write_bytes(new)
    url = f"s3://{BUCKET}/ckpt/latest.bin"
    r = tool("put", str(tmp_path / "old.bin"), url, env=via(proxy))  # PASS
    assert r.returncode == 0, r.stderr.decode()
    proxy.set_fault(DROP_REQUEST, after_bytes=BIG // 2)
    r = tool(*FAST_FAIL, "put", str(tmp_path / "new.bin"), url, env=via(proxy))
    assert r.returncode == 1 and b"UNAVAILABLE" in r.stderr, r.stderr.decode()
    node("get", BUCKET, "ckpt/latest.bin", str(tmp_path / "back.bin"))
    assert (tmp_path / "back.bin").read_bytes() == old


@requires_s3rver
def test_put_cut_on_every_attempt_is_an_error_never_a_success(server, proxy, tmp_path):
    # The upstream sees each truncated upload (s3rver keeps it; S3 would not), so only
    # the client's side is asserted: the call fails and says so.
    src = tmp_path / "new.bin"
    src.write_bytes(os.urandom(BIG))
    proxy.set_fault(CUT_REQUEST, after_bytes=BIG // 2)
    r, elapsed = timed_tool(*FAST_FAIL, "put", str(src), f"s3://{BUCKET}/ckpt/cut.bin",
                            env=via(proxy))
    assert r.returncode == 1
    err = r.stderr.decode()
    assert "UNAVAILABLE" in err and "ckpt/cut.bin" in err and "after 3 attempts" in err, err
    assert elapsed < 30, elapsed


@requires_s3rver
def test_put_cut_once_then_healthy_stores_the_whole_object(server, proxy, tmp_path):
    data = os.urandom(BIG)
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    proxy.set_fault(CUT_REQUEST, after_bytes=BIG // 2, times=1)
    r = tool("put", str(src), f"s3://{BUCKET}/ckpt/retry.bin", env=via(proxy))
    assert r.returncode == 0, r.stderr.decode()
    assert proxy.stats() == {"accepted": 2, "faulted": 1}
    node("get", BUCKET, "ckpt/retry.bin", str(tmp_path / "back.bin"))
    assert (tmp_path / "back.bin").read_bytes() == data  # the retry replaced it whole


@requires_s3rver
@pytest.mark.parametrize("after_bytes", [None, BIG // 2],
                         ids=["before-answering", "mid-body"])
def test_stalled_server_ends_in_deadline_exceeded(server, proxy, tmp_path, after_bytes):
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(BIG))
    node("put", BUCKET, "ckpt/model.bin", str(src))
    proxy.set_fault(STALL, after_bytes=after_bytes)
    r, elapsed = timed_tool("--attempts=2", "--timeout-ms=1500", "get",
                            f"s3://{BUCKET}/ckpt/model.bin", "-", env=via(proxy))
    assert r.returncode == 1
    err = r.stderr.decode()
    assert "DEADLINE_EXCEEDED" in err and "ckpt/model.bin" in err, err
    assert "after 2 attempts" in err, err
    assert elapsed < 30, elapsed


@requires_s3rver
def test_refused_connections_fail_fast_and_recover(server, proxy, tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(b"payload")
    url = f"s3://{BUCKET}/k"
    proxy.set_fault(REFUSE)
    r, elapsed = timed_tool(*FAST_FAIL, "put", str(src), url, env=via(proxy))
    assert r.returncode == 1
    err = r.stderr.decode()
    assert "UNAVAILABLE" in err and "nothing accepts connections" in err, err
    assert "after 3 attempts" in err and url in err, err
    assert elapsed < 30, elapsed
    proxy.set_fault(PASS)  # listens on the same port again
    r = tool("put", str(src), url, env=via(proxy))
    assert r.returncode == 0, r.stderr.decode()
    assert tool("get", url, "-", env=via(proxy)).stdout == b"payload"


@requires_s3rver
def test_put_sends_the_content_md5_of_the_body(server, proxy, tmp_path):
    data = os.urandom(70_000)
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    r = tool("put", str(src), f"s3://{BUCKET}/md5.bin", env=via(proxy))
    assert r.returncode == 0, r.stderr.decode()  # s3rver accepts the header
    (head,) = proxy.request_heads()
    headers = _parse_head(head)
    assert headers["content-md5"] == base64.b64encode(hashlib.md5(data).digest()).decode()
    assert "content-md5" in headers["authorization"]  # signed, not just sent


# --- a body corrupted in transit ---------------------------------------------------


class _DigestCheckingS3(StubServer):
    """Just enough of S3 for PutObject's integrity check: 200 when the body matches
    Content-MD5, else 400 BadDigest with S3's error document. Stores nothing."""


    def __init__(self):
        self.puts = []  # (key, status) per request
        super().__init__(_DigestHandler)


class _DigestHandler(StubHandler):
    def do_PUT(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        expected = base64.b64encode(hashlib.md5(body).digest()).decode()
        ok = self.headers.get("Content-MD5") == expected
        self.server.puts.append((self.path, 200 if ok else 400))
        reply = b"" if ok else (
            b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>BadDigest</Code>'
            b"<Message>The Content-MD5 you specified did not match what we received."
            b"</Message></Error>")
        self.reply(200 if ok else 400, reply)


@pytest.fixture
def digest_stub():
    with serving(_DigestCheckingS3()) as stub, FaultProxy(stub.server_address[1]) as proxy:
        yield stub, proxy, stub_env(proxy.endpoint)


@requires_tool
def test_body_corrupted_in_transit_is_retried_then_reported_as_data_loss(digest_stub,
                                                                        tmp_path):
    stub, proxy, env = digest_stub
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(200_000))
    url = f"s3://{BUCKET}/ckpt/step-7.bin"
    proxy.set_fault(CORRUPT_REQUEST, after_bytes=100_000, times=1)  # inside the body
    r = tool(*FAST_FAIL, "put", str(src), url, env=env)
    assert r.returncode == 0, r.stderr.decode()
    assert [s for _, s in stub.puts] == [400, 200]  # rejected once, resent whole

    stub.puts.clear()
    proxy.set_fault(CORRUPT_REQUEST, after_bytes=100_000)
    r = tool(*FAST_FAIL, "put", str(src), url, env=env)
    assert r.returncode == 1
    err = r.stderr.decode()
    assert "DATA_LOSS" in err and "BadDigest" in err and "HTTP 400" in err, err
    assert url in err and f"bucket '{BUCKET}'" in err and "after 3 attempts" in err, err
    assert [s for _, s in stub.puts] == [400, 400, 400]


# --- what s3rver does not check ---------------------------------------------------------


@requires_s3rver
def test_s3rver_fidelity_gaps(server):
    """Pins the two s3rver 3.7 behaviours the tests above work around, with raw HTTP
    (s3rver checks the access key id, not V4 signatures, so a dummy signature passes).
    If s3rver ever starts checking, this fails: then assert BadDigest / "no object"
    against s3rver directly instead of the stub and DROP_REQUEST."""
    body = b"A" * 100_000
    wrong_md5 = base64.b64encode(hashlib.md5(b"something else").digest()).decode()
    status, _ = raw_request("PUT", server.port, "wrong-md5", {"Content-MD5": wrong_md5}, body)
    assert status == 200  # S3 would answer 400 BadDigest
    raw_request("PUT", server.port, "truncated", body=body, send_only=50_000)
    out = tool("head", f"s3://{BUCKET}/truncated")
    for _ in range(50):  # s3rver writes the stream asynchronously
        if out.returncode == 0 and out.stdout.split(b"\t")[0] == b"50000":
            break
        time.sleep(0.1)
        out = tool("head", f"s3://{BUCKET}/truncated")
    assert out.stdout.split(b"\t")[0] == b"50000", out  # S3 would store nothing




def _parse_head(head):
    lines = head.decode("latin-1").split("\r\n")[1:]
    return {k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in lines)}


# --- FaultProxy itself (no s3rver needed) ---------------------------------------------


class _Upstream:
    """Accepts connections; each reads `request_size` bytes (or to EOF), records them,
    answers `response` and closes."""

    def __init__(self, request_size, response):
        self.request_size, self.response = request_size, response
        self.received = []  # bytes per connection
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(10)
                got = b""
                try:
                    while len(got) < self.request_size:
                        chunk = conn.recv(65536)
                        if not chunk:
                            break
                        got += chunk
                except OSError:
                    pass
                self.received.append(got)
                try:
                    if len(got) == self.request_size:
                        conn.sendall(self.response)
                except OSError:
                    pass  # the proxy cut the response

    def stop(self):
        self.stopping.set()
        self.thread.join(10)
        self.sock.close()


def _exchange(port, request, read=True):
    """Sends `request`, then reads until EOF; returns (reply, error or None)."""
    reply = b""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        try:
            s.sendall(request)
            while read and (chunk := s.recv(65536)):
                reply += chunk
        except OSError as e:
            return reply, e
    return reply, None


@pytest.fixture
def upstream():
    u = _Upstream(request_size=20_000, response=bytes(range(256)) * 400)
    yield u
    u.stop()


def test_proxy_cuts_and_corrupts_exactly_where_told(upstream):
    request = os.urandom(20_000)
    with FaultProxy(upstream.port) as proxy:
        assert _exchange(proxy.port, request) == (upstream.response, None)  # PASS
        proxy.set_fault(CUT_RESPONSE, after_bytes=1234, times=1)
        reply, _ = _exchange(proxy.port, request)
        assert reply == upstream.response[:1234]
        proxy.set_fault(CUT_REQUEST, after_bytes=5000, times=1)
        _exchange(proxy.port, request)
        proxy.set_fault(CORRUPT_REQUEST, after_bytes=7, times=1)
        assert _exchange(proxy.port, request)[0] == upstream.response
        assert _exchange(proxy.port, request)[0] == upstream.response  # back to PASS
        assert proxy.stats() == {"accepted": 5, "faulted": 3}
    deadline = time.monotonic() + 10
    while len(upstream.received) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    full, cut, corrupt, healthy = (upstream.received[i] for i in (1, 2, 3, 4))
    assert full == request and healthy == request
    assert cut == request[:5000]  # the upstream saw exactly the first 5000 bytes
    assert corrupt[:7] == request[:7] and corrupt[8:] == request[8:]
    assert corrupt[7] == request[7] ^ 0xFF


def test_proxy_drop_stall_refuse_and_stop_are_bounded(upstream):
    proxy = FaultProxy(upstream.port)
    proxy.set_fault(DROP_REQUEST, after_bytes=100)
    reply, _ = _exchange(proxy.port, os.urandom(20_000))
    assert reply == b""
    proxy.set_fault(STALL)
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=0.3) as s:
        s.sendall(b"GET / HTTP/1.1\r\n\r\n")
        with pytest.raises(socket.timeout):
            s.recv(1)  # never answered
    assert upstream.received == []  # neither fault reached the upstream
    assert proxy.request_heads()[-1] == b"GET / HTTP/1.1"
    proxy.set_fault(REFUSE)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", proxy.port), timeout=2)
    proxy.set_fault(PASS)
    assert _exchange(proxy.port, os.urandom(20_000))[0] == upstream.response
    held = socket.create_connection(("127.0.0.1", proxy.port), timeout=2)  # left open
    start = time.monotonic()
    proxy.stop()
    assert time.monotonic() - start < 10
    assert held.recv(1) == b""  # stop() closed the held connection
    held.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", proxy.port), timeout=2)
    with pytest.raises(RuntimeError):
        proxy.set_fault(PASS)


# --- retry policy against a scripted stub ---------------------------------------------


def _s3_error(code, message):
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
            f"<Message>{message}</Message></Error>").encode()


class _ScriptedS3(StubServer):
    """Answers the i-th request with script[i] (the last entry once the script runs
    out): (status, headers, body). Records (method, path, time.monotonic()) per request."""


    def __init__(self, script):
        self.script = script
        self.requests = []
        self.lock = threading.Lock()
        super().__init__(_ScriptedHandler)

    def gaps(self):
        times = [t for _, _, t in self.requests]
        return [b - a for a, b in zip(times, times[1:])]


class _ScriptedHandler(StubHandler):
    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        with self.server.lock:
            i = len(self.server.requests)
            self.server.requests.append((self.command, self.path, time.monotonic()))
        status, headers, body = self.server.script[min(i, len(self.server.script) - 1)]
        self.reply(status, body, headers)

    do_GET = do_PUT = do_HEAD = do_DELETE = _answer


@contextmanager
def _scripted(script):
    with serving(_ScriptedS3(script)) as stub:
        yield stub, stub_env(f"http://127.0.0.1:{stub.server_address[1]}")


OK_BODY = b"the object's bytes"
OK = (200, {"ETag": '"e"'}, OK_BODY)


@requires_tool
@pytest.mark.parametrize("status,code", [(503, "SlowDown"), (429, "TooManyRequests")])
def test_retry_after_seconds_on_503_and_429_is_honoured(status, code):
    throttled = (status, {"Retry-After": "1"}, _s3_error(code, "Please reduce your rate"))
    with _scripted([throttled, OK]) as (stub, env):
        r = tool(*FAST_FAIL, "get", f"s3://{BUCKET}/k", "-", env=env)
    assert r.returncode == 0 and r.stdout == OK_BODY, r.stderr.decode()
    assert len(stub.requests) == 2
    # Without Retry-After the first pause is at most initial_backoff (100 ms).
    (gap,) = stub.gaps()
    assert 0.9 < gap < 4, gap


@requires_tool
def test_http_400_request_timeout_is_retried():
    idle = (400, {}, _s3_error(
        "RequestTimeout", "Your socket connection to the server was not read from or "
        "written to within the timeout period."))
    with _scripted([idle, OK]) as (stub, env):
        r = tool(*FAST_FAIL, "get", f"s3://{BUCKET}/k", "-", env=env)
        assert r.returncode == 0 and r.stdout == OK_BODY, r.stderr.decode()
        assert len(stub.requests) == 2
    with _scripted([idle]) as (stub, env):
        r = tool(*FAST_FAIL, "get", f"s3://{BUCKET}/k", "-", env=env)
    err = r.stderr.decode()
    assert r.returncode == 1 and len(stub.requests) == 3, err
    assert "UNAVAILABLE" in err and "RequestTimeout" in err and "after 3 attempts" in err, err


@requires_tool
def test_http_501_not_implemented_is_not_retried_and_names_the_operation(tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(b"payload")
    url = f"s3://{BUCKET}/ckpt/x.bin"
    not_implemented = (501, {}, _s3_error(
        "NotImplemented", "A header you provided implies functionality that is not "
        "implemented"))
    with _scripted([not_implemented, OK]) as (stub, env):
        r = tool(*FAST_FAIL, "put", str(src), url, env=env)
    err = r.stderr.decode()
    assert r.returncode == 1, err
    assert [m for m, _, _ in stub.requests] == ["PUT"]  # once, never retried
    assert "UNIMPLEMENTED" in err and "HTTP 501" in err and "NotImplemented" in err, err
    assert f"S3 PUT {url}" in err and "(after " not in err, err
