"""A fault-injecting HTTP proxy on 127.0.0.1 in front of the test S3 server, for S3 fault tests.

The code under test gets the proxy's URL as its S3 endpoint. Requests pass through unchanged (the Host
header too, so request signatures still verify) unless a scripted fault matches:

    proxy.fail(503, "SlowDown", times=3)                 # a burst of throttling answers, then normal
    proxy.fail(400, "ExpiredToken", times=None)          # every request, until proxy.clear()
    proxy.outage()                                       # every connection closed without an answer
    proxy.fail(500, "InternalError", when="apply", method="PUT", path=r"_delta_log/.*\\.json")
                                                         # the write happens upstream, the answer is a 500

    proxy.fail(0, delay=5, times=1, path=r"list-type=2")  # a slow answer (status 0 + delay: pass through late)
    proxy.token_lifetime = 4.0                            # STS tokens expire 4 s after issue, enforced here

Each fault counts the requests it answered (``fault.hits``); ``proxy.requests`` logs (method, path).
With ``token_lifetime`` set, an AssumeRole answer's Expiration is rewritten to that many seconds from now,
and a request signed with such a key after it expired is answered 400 ExpiredToken, as S3 would.
"""

from __future__ import annotations

import http.client
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit


@dataclass
class Fault:
    status: int  # 0: close the connection without answering (an outage)
    code: str = ""
    message: str = ""
    times: int | None = 1  # None: until cleared
    method: str | None = None
    path: str | None = None  # a regular expression searched in the request path (with its query)
    when: str = "before"  # "before": the upstream never sees the request; "apply": it does, the answer is lost
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # with status 0: pass the request through after this many seconds
    hits: int = 0

    def matches(self, method: str, path: str) -> bool:
        if self.times is not None and self.hits >= self.times:
            return False
        if self.method and method != self.method:
            return False
        return not (self.path and not re.search(self.path, path))


class FaultProxy:
    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname, parts.port)
        self.faults: list[Fault] = []
        self.requests: list[tuple[str, str]] = []
        self.token_lifetime: float | None = None
        self.tokens: dict[str, float] = {}  # access key id -> expiry (time.time()) of keys issued by STS
        self.expired_requests = 0
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def _handle(self) -> None:
                body = self._body()
                fault = proxy._take(self.command, self.path)
                if proxy._expired(self.headers.get("Authorization", "")):
                    self._error(Fault(400, "ExpiredToken", "The provided token has expired."))
                    return
                if fault is not None and fault.status == 0 and fault.delay:
                    time.sleep(fault.delay)
                    fault = None
                if fault is not None and fault.status == 0:
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if fault is not None and fault.when == "before":
                    self._error(fault)
                    return
                status, headers, data = proxy._forward(self.command, self.path, self.headers, body)
                data = proxy._shorten_tokens(data)
                if fault is not None:  # applied upstream; the client never hears so
                    self._error(fault)
                    return
                self.send_response(status)
                for name, value in headers:
                    if name.lower() not in ("transfer-encoding", "connection", "content-length", "server", "date"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    chunks = []
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            self.rfile.readline()
                            break
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                    return b"".join(chunks)
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else b""

            def _error(self, fault: Fault) -> None:
                xml = (
                    '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>' + fault.code + "</Code><Message>"
                    + (fault.message or fault.code) + "</Message><RequestId>fault</RequestId></Error>"
                ).encode()
                self.send_response(fault.status)
                for name, value in fault.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(0 if self.command == "HEAD" else len(xml)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(xml)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    # -- scripting ---------------------------------------------------------------------------------
    def fail(self, status: int, code: str = "", **kwargs) -> Fault:
        fault = Fault(status, code, **kwargs)
        with self._lock:
            self.faults.append(fault)
        return fault

    def outage(self, times: int | None = None) -> Fault:
        return self.fail(0, times=times)

    def clear(self) -> None:
        with self._lock:
            self.faults.clear()
            self.requests.clear()
            self.tokens.clear()
            self.token_lifetime = None
            self.expired_requests = 0

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    # -- internals ---------------------------------------------------------------------------------
    def _expired(self, authorization: str) -> bool:
        match = re.search(r"Credential=([A-Z0-9]+)/", authorization)
        with self._lock:
            expiry = self.tokens.get(match.group(1)) if match else None
            if expiry is not None and time.time() > expiry:
                self.expired_requests += 1
                return True
        return False

    def _shorten_tokens(self, data: bytes) -> bytes:
        if self.token_lifetime is None or b"<AssumeRoleResult>" not in data:
            return data
        expiry = time.time() + self.token_lifetime
        key = re.search(rb"<AccessKeyId>([A-Z0-9]+)</AccessKeyId>", data).group(1).decode()
        with self._lock:
            self.tokens[key] = expiry
        stamp = datetime.fromtimestamp(expiry, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ").encode()
        return re.sub(rb"<Expiration>[^<]*</Expiration>", b"<Expiration>" + stamp + b"</Expiration>", data)

    def _take(self, method: str, path: str) -> Fault | None:
        with self._lock:
            self.requests.append((method, path))
            for fault in self.faults:
                if fault.matches(method, path):
                    fault.hits += 1
                    return fault
        return None

    def _forward(self, method: str, path: str, headers, body: bytes) -> tuple[int, list, bytes]:
        con = http.client.HTTPConnection(*self.upstream, timeout=60)
        try:
            con.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            for name, value in headers.items():
                if name.lower() not in ("transfer-encoding", "content-length", "connection"):
                    con.putheader(name, value)
            con.putheader("Content-Length", str(len(body)))
            con.endheaders(body)
            response = con.getresponse()
            return response.status, response.getheaders(), response.read()
        finally:
            con.close()
