"""FaultProxy: a TCP proxy that breaks connections on purpose, for "the server stops
mid-transfer" tests (pure Python stdlib, thread-safe).

It sits between a client (s3_tool, zephond, the AWS SDK) and an upstream server
(s3rver) on loopback and applies one fault at a time, switchable while it runs:

    from fault_proxy import FaultProxy, CUT_RESPONSE

    proxy = FaultProxy(server.port)                 # listens on 127.0.0.1:<free port>
    env = {"AWS_ENDPOINT_URL": proxy.endpoint}      # point the client at the proxy
    proxy.set_fault(CUT_RESPONSE, after_bytes=50_000, times=1)   # next connection only
    proxy.set_fault(DROP_REQUEST, after_bytes=900, methods=("PUT",))  # uploads only
    ...                                             # the retry gets PASS again
    proxy.stats()          # {"accepted": 2, "faulted": 1}
    proxy.stop()           # or: with FaultProxy(port) as proxy: ...

Faults (a fault is chosen per connection, when the proxy accepts it; a client that
keeps connections alive sees a new fault only on its next new connection). Byte counts
include the HTTP status line and headers, so to cut inside a body pick `after_bytes`
well inside the object (headers are a few hundred bytes):

  PASS             forward both ways untouched.
  CUT_RESPONSE     forward the request; forward the first `after_bytes` bytes of the
                   response, then close both connections (a server dying mid-download:
                   curl reports CURLE_PARTIAL_FILE).
  CUT_REQUEST      forward the first `after_bytes` bytes of the request upstream, then
                   close both connections. The upstream sees a truncated upload; NOTE:
                   s3rver 3.7 then keeps the truncated body as the object (and truncates
                   an old version), which real S3 never does.
  DROP_REQUEST     a server that dies mid-upload before storing anything: read
                   `after_bytes` request bytes from the client, forward nothing, close.
                   Nothing reaches the upstream, which is what S3 guarantees for an
                   interrupted PUT, so "no partial object" can be asserted over s3rver.
  STALL            accept and never answer. after_bytes=None: nothing is forwarded (the
                   request never reaches the upstream); after_bytes=N: the request is
                   forwarded and the first N response bytes too, then the connection is
                   held open silently (a server hanging mid-download).
  CORRUPT_REQUEST  forward everything, but flip the byte at request offset `after_bytes`
                   (only a server that checks Content-MD5 / x-amz-content-sha256 notices;
                   s3rver does not, real S3 answers 400 BadDigest).
  REFUSE           stop listening: new connections are refused (ECONNREFUSED) until
                   another fault is set, which listens on the same port again.
  DELAY            forward untouched, but only `after_bytes` milliseconds after the
                   connection arrived (a slow store: makes concurrent requests overlap).

Every blocking step has a timeout (upstream connect 5 s, socket I/O `io_timeout_s`,
set_fault and stop 5 s), and stop() closes every socket and joins every thread.
"""
import select
import socket
import threading
import time

PASS = "pass"
CUT_RESPONSE = "cut_response"
CUT_REQUEST = "cut_request"
DROP_REQUEST = "drop_request"
STALL = "stall"
CORRUPT_REQUEST = "corrupt_request"
REFUSE = "refuse"
DELAY = "delay"

KINDS = (PASS, CUT_RESPONSE, CUT_REQUEST, DROP_REQUEST, STALL, CORRUPT_REQUEST, REFUSE, DELAY)
_NEEDS_BYTES = (CUT_RESPONSE, CUT_REQUEST, DROP_REQUEST, CORRUPT_REQUEST, DELAY)

_POLL_S = 0.05            # how often loops look at the stop flag
_CONTROL_TIMEOUT_S = 5.0  # set_fault / stop / upstream connect
_HEAD_LIMIT = 65536       # bytes of each request head kept for request_heads()


class FaultProxy:
    """A loopback TCP proxy to 127.0.0.1:`upstream_port` with switchable faults.

    Thread-safe: set_fault, stats, request_heads and stop may be called from any thread
    while connections are being served.
    """

    def __init__(self, upstream_port, upstream_host="127.0.0.1", io_timeout_s=30.0):
        self.upstream = (upstream_host, upstream_port)
        self.io_timeout_s = io_timeout_s
        self._lock = threading.Lock()
        self._fault = (PASS, None)
        self._methods = None        # None: every method; else the methods to fault
        self._times = None          # None: every new connection; k: the next k
        self._accepted = 0
        self._faulted = 0
        self._heads = []
        self._conns = set()         # every open socket, for stop()
        self._threads = []
        self._closing = threading.Event()
        # Listener state belongs to the accept thread; set_fault asks for a change and
        # waits for the acknowledgement.
        self._want_listening = True
        self._listen_changed = threading.Condition(self._lock)
        self._listen_error = None
        self._listening = False
        self._listener = self._listen(0)
        self.port = self._listener.getsockname()[1]
        self._listening = True
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._acceptor = threading.Thread(target=self._accept_loop, name="fault-proxy-accept",
                                          daemon=True)
        self._acceptor.start()

    # --- public API ------------------------------------------------------------------

    def set_fault(self, kind, after_bytes=None, times=None, methods=None):
        """Applies `kind` to new connections: all of them (times=None) or the next
        `times` ones, after which the proxy goes back to PASS. Connections already open
        keep their fault. `methods` (e.g. ("PUT",)) limits the fault to connections whose
        first request uses one of those HTTP methods; the others pass (so a test can
        break uploads while downloads keep working). Returns once the fault is in effect
        (for REFUSE: once the port no longer accepts; leaving REFUSE: once it accepts
        again)."""
        if kind not in KINDS:
            raise ValueError(f"unknown fault {kind!r}; one of {KINDS}")
        if kind in _NEEDS_BYTES and (after_bytes is None or after_bytes < 0):
            raise ValueError(f"{kind} needs after_bytes >= 0")
        if after_bytes is not None and after_bytes < 0:
            raise ValueError("after_bytes must be >= 0")
        if kind == REFUSE and times is not None:
            raise ValueError("REFUSE applies until the next set_fault; times is not supported")
        if times is not None and times < 1:
            raise ValueError("times must be >= 1 or None")
        if methods is not None and (kind == REFUSE or times is not None):
            raise ValueError("methods works per connection: not with REFUSE or times")
        with self._lock:
            if self._closing.is_set():
                raise RuntimeError("FaultProxy is stopped")
            self._fault = (kind, after_bytes)
            self._methods = None if methods is None else tuple(m.encode() for m in methods)
            self._times = times
            self._want_listening = kind != REFUSE
            self._listen_error = None
            ok = self._listen_changed.wait_for(
                lambda: self._listening == self._want_listening or self._listen_error,
                timeout=_CONTROL_TIMEOUT_S)
            if self._listen_error:
                raise RuntimeError(f"FaultProxy could not listen on port {self.port} again: "
                                   f"{self._listen_error}")
            if not ok:
                raise RuntimeError("FaultProxy accept thread did not apply the fault in time")

    def stats(self):
        """{"accepted": connections accepted, "faulted": those given a fault != PASS}."""
        with self._lock:
            return {"accepted": self._accepted, "faulted": self._faulted}

    def request_heads(self):
        """The head (request line and headers, bytes) of the first request of every
        connection that forwarded or read one, in the order they arrived."""
        with self._lock:
            return list(self._heads)

    def stop(self):
        """Closes the listener and every connection and joins all threads. Idempotent."""
        self._closing.set()
        with self._lock:
            self._listen_changed.notify_all()
        self._acceptor.join(_CONTROL_TIMEOUT_S)  # no new connections after this
        with self._lock:
            conns = list(self._conns)
            threads = list(self._threads)
        for s in conns:
            _close(s)
        for t in threads:
            t.join(_CONTROL_TIMEOUT_S)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    # --- internals -------------------------------------------------------------------

    def _listen(self, port):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            s.listen(64)
        except OSError:
            s.close()
            raise
        s.settimeout(_POLL_S)
        return s

    def _track(self, s):
        with self._lock:
            self._conns.add(s)

    def _untrack_close(self, s):
        with self._lock:
            self._conns.discard(s)
        _close(s)

    def _accept_loop(self):
        while not self._closing.is_set():
            with self._lock:
                want = self._want_listening
            if want != (self._listener is not None):
                self._switch_listening(want)
            if self._listener is None:
                self._closing.wait(_POLL_S)
                continue
            try:
                client, _ = self._listener.accept()
            except (socket.timeout, BlockingIOError):
                continue
            except OSError:
                if self._closing.is_set():
                    break
                continue
            with self._lock:
                kind, after = self._fault
                methods = self._methods
                if self._times is not None:
                    self._times -= 1
                    if self._times == 0:
                        self._fault, self._times = (PASS, None), None
                self._accepted += 1
                if kind != PASS and methods is None:  # else counted once the method is seen
                    self._faulted += 1
                self._conns.add(client)
                t = threading.Thread(target=self._serve, args=(client, kind, after, methods),
                                     name=f"fault-proxy-{kind}", daemon=True)
                self._threads = [x for x in self._threads if x.is_alive()] + [t]
            t.start()
        if self._listener is not None:
            _close(self._listener)
            self._listener = None

    def _switch_listening(self, want):
        error = None
        if want:
            try:
                self._listener = self._listen(self.port)
            except OSError as e:
                error = str(e)
        else:
            _close(self._listener)
            self._listener = None
        with self._lock:
            self._listening = self._listener is not None
            if error:
                self._listen_error = error
                self._want_listening = False
            self._listen_changed.notify_all()

    def _serve(self, client, kind, after, methods=None):
        upstream = None
        try:
            client.settimeout(self.io_timeout_s)
            if methods is not None and kind != PASS:
                if _peek_method(client) not in methods:
                    kind = PASS
                else:
                    with self._lock:
                        self._faulted += 1
            if kind == DELAY:
                if self._closing.wait(after / 1000.0):
                    return
                kind = PASS
            if kind == DROP_REQUEST or (kind == STALL and after is None):
                self._swallow(client, limit=after if kind == DROP_REQUEST else None)
                return
            try:
                upstream = socket.create_connection(self.upstream, timeout=_CONTROL_TIMEOUT_S)
            except OSError:
                return  # the client sees the connection closed without an answer
            self._track(upstream)
            upstream.settimeout(self.io_timeout_s)
            self._pump(client, upstream, kind, after)
        except (OSError, ValueError):
            pass  # a peer went away or stop() closed the socket (fileno -1): it ends
        finally:
            if upstream is not None:
                self._untrack_close(upstream)
            self._untrack_close(client)

    def _swallow(self, client, limit):
        """Reads from `client` and forwards nothing: until `limit` bytes (then returns,
        closing) or, with limit None, until the client or stop() closes."""
        got = 0
        head = _Head(self)
        while not self._closing.is_set() and (limit is None or got < limit):
            readable, _, _ = select.select([client], [], [], _POLL_S)
            if not readable:
                continue
            data = client.recv(65536 if limit is None else min(65536, limit - got))
            if not data:
                break
            got += len(data)
            head.feed(data)
        head.flush()

    def _pump(self, client, upstream, kind, after):
        sent_up = 0          # request bytes forwarded upstream
        sent_down = 0        # response bytes forwarded to the client
        head = _Head(self)
        client_open = True
        stalled = False      # STALL with after_bytes: nothing more is forwarded
        try:
            while not self._closing.is_set():
                watch = ([client] if client_open else []) + ([] if stalled else [upstream])
                if not watch:
                    return
                readable, _, _ = select.select(watch, [], [], _POLL_S)
                if client in readable:
                    data = client.recv(65536)
                    if not data:
                        if stalled:
                            return
                        client_open = False
                        upstream.shutdown(socket.SHUT_WR)  # pass the half-close on
                    elif not stalled:  # when stalled, client bytes are discarded
                        head.feed(data)
                        if kind == CORRUPT_REQUEST and sent_up <= after < sent_up + len(data):
                            buf = bytearray(data)
                            buf[after - sent_up] ^= 0xFF
                            data = bytes(buf)
                        if kind == CUT_REQUEST and sent_up + len(data) >= after:
                            upstream.sendall(data[:after - sent_up])
                            return  # close both mid-request
                        upstream.sendall(data)
                        sent_up += len(data)
                if upstream in readable:
                    data = upstream.recv(65536)
                    if not data:
                        return  # the upstream finished or died: close the client too
                    limit = after if kind in (CUT_RESPONSE, STALL) else None
                    if limit is not None and sent_down + len(data) >= limit:
                        client.sendall(data[:limit - sent_down])
                        if kind == CUT_RESPONSE:
                            return
                        stalled = True
                        self._untrack_close(upstream)
                        continue
                    client.sendall(data)
                    sent_down += len(data)
        finally:
            head.flush()


class _Head:
    """Collects the first request head of a connection for FaultProxy.request_heads."""

    def __init__(self, proxy):
        self._proxy = proxy
        self._buf = bytearray()
        self._done = False

    def feed(self, data):
        if self._done:
            return
        self._buf += data
        if b"\r\n\r\n" in self._buf or len(self._buf) >= _HEAD_LIMIT:
            self.flush()

    def flush(self):
        if self._done or not self._buf:
            return
        self._done = True
        with self._proxy._lock:
            self._proxy._heads.append(bytes(self._buf.split(b"\r\n\r\n", 1)[0]))


def _peek_method(client, timeout_s=_CONTROL_TIMEOUT_S):
    """The HTTP method of the request waiting on `client` (b"" if none arrives within
    `timeout_s`), read with MSG_PEEK so the bytes are still forwarded. MSG_PEEK returns
    what is buffered at once, so between peeks wait (select) for more to arrive."""
    deadline = time.monotonic() + timeout_s
    seen = b""
    while True:
        seen = client.recv(16, socket.MSG_PEEK)
        if b" " in seen or len(seen) >= 16 or not seen:
            break
        # Buffered bytes keep the socket readable: wait a poll period for more.
        left = deadline - time.monotonic()
        if left <= 0:
            break
        time.sleep(min(_POLL_S / 5, left))
    return seen.split(b" ", 1)[0]


def _close(s):
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        s.close()
    except OSError:
        pass
