"""The HTTP side: a threaded server on 127.0.0.1, its start and stop (a refused port is the
server really closed), the failures a test asks for, and sending the answers."""
from __future__ import annotations

import http.client
import math
import socket
import threading
import time
from collections import namedtuple
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional
from urllib.parse import parse_qsl, urlsplit

from fakes.woocommerce.errors import FATAL_MESSAGE, MAINTENANCE_HTML, ApiError
from fakes.woocommerce.wordpress import php_json_encode

Request = namedtuple("Request", "method path query")


class StoreHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


class StoreRequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "Apache"
    sys_version = ""

    def setup(self):
        super().setup()
        self.server.store._track(self.connection, True)

    def finish(self):
        try:
            super().finish()
        finally:
            self.server.store._track(self.connection, False)

    def _dispatch(self):
        self.server.store._handle(self)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _dispatch

    def log_message(self, format, *args):  # noqa: A002 - signature from the base class
        pass


class ServerMixin:
    """Serving the store: lifecycle, test-controlled outages and failures, request handling."""

    def start(self) -> "FakeWooStore":
        with self._lock:
            if self._started:
                return self
            self._started = True
            if self._down != "refuse":
                self._serve()
        return self

    def stop(self) -> None:
        with self._lock:
            self._started = False
            self._unserve()

    def __enter__(self) -> "FakeWooStore":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _serve(self) -> None:
        if self._server is None:
            self._server = StoreHTTPServer((self._host, self.port), StoreRequestHandler)
            self._server.store = self
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name=f"FakeWooStore:{self.port}", daemon=True)
        self._thread.start()

    def _unserve(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            if self._thread is not None:
                server.shutdown()
                self._thread.join(timeout=5)
                self._thread = None
            server.server_close()
        for conn in list(self._conns):
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._conns.clear()

    def _track(self, conn, opened: bool) -> None:
        with self._lock:
            if opened:
                self._conns.add(conn)
            else:
                self._conns.discard(conn)

    def set_down(self, down: bool = True, mode: str = "503",
                 retry_after: Optional[float] = None) -> None:
        """``mode="503"``: every request gets WordPress' maintenance page (503, HTML).
        ``mode="refuse"``: the port is closed (connection refused) until ``set_down(False)``."""
        if mode not in ("503", "refuse"):
            raise ValueError("mode must be '503' or 'refuse'")
        with self._lock:
            was = self._down
            self._down = mode if down else None
            self._down_retry_after = retry_after
            if down and mode == "refuse" and was != "refuse":
                self._unserve()
            elif was == "refuse" and self._down != "refuse" and self._started:
                self._serve()

    _DEFAULT = object()

    def fail_next(self, n: int = 1, status: int = 500, retry_after: Any = _DEFAULT) -> None:
        """The next ``n`` requests fail with ``status``. 429/503 carry ``Retry-After``
        (default 2 s; pass ``retry_after=None`` to omit it)."""
        if retry_after is self._DEFAULT:
            retry_after = 2 if status in (429, 503) else None
        with self._lock:
            self._fail_queue.extend([(status, retry_after)] * n)

    def reset_requests(self) -> None:
        with self._lock:
            self.requests.clear()
            self.request_log.clear()

    def _track_request(self, method: str, path: str, query: dict, headers: dict) -> None:
        with self._lock:
            self.requests.append(Request(method, path, query))
            self.request_log.append({"method": method, "path": path, "query": query,
                                     "headers": headers, "time": time.time()})

    def _handle(self, h: StoreRequestHandler) -> None:
        method = h.command
        parts = urlsplit(h.path)
        path = parts.path
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        query: dict[str, Any] = {}
        for key, value in pairs:
            if key in query:
                query[key] = (query[key] if isinstance(query[key], list) else [query[key]]) + [value]
            else:
                query[key] = value
        length = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(length) if length else b""
        self._track_request(method, path, query, dict(h.headers.items()))

        if self.delay:
            time.sleep(self.delay)

        with self._lock:
            down, down_retry = self._down, self._down_retry_after
            failure = self._fail_queue.pop(0) if self._fail_queue else None
        if down == "503":
            headers = {"Content-Type": "text/html; charset=utf-8"}
            if down_retry is not None:
                headers["Retry-After"] = str(int(down_retry))
            return self._send(h, 503, MAINTENANCE_HTML.encode(), headers)
        if failure is not None:
            return self._send_failure(h, *failure)

        if not (path == "/wp-json" or path.startswith("/wp-json/")):
            return self._send(h, 404, b"<!DOCTYPE html><html><body><h1>Not Found</h1></body></html>",
                              {"Content-Type": "text/html; charset=UTF-8"})
        try:
            status, data, headers = self._route(method, path, query, body, h.headers)
        except ApiError as err:
            status, data, headers = err.status, err.body, err.headers
        except Exception as exc:  # pragma: no cover - a bug in the fake shows as a 500
            status, data, headers = 500, {"code": "internal_server_error", "message": FATAL_MESSAGE,
                                          "data": {"status": 500}, "additional_errors": [],
                                          "fake_error": repr(exc)}, {}
        payload = php_json_encode(data).encode("ascii")
        base_headers = {
            "Content-Type": "application/json; charset=UTF-8",
            "X-Robots-Tag": "noindex",
            "X-Content-Type-Options": "nosniff",
            "Access-Control-Expose-Headers": "X-WP-Total, X-WP-TotalPages, Link",
            "Access-Control-Allow-Headers": "Authorization, X-WP-Nonce, Content-Disposition, Content-MD5, Content-Type",
        }
        base_headers.update(headers)
        self._send(h, status, payload, base_headers, head_only=method == "HEAD")

    def _send_failure(self, h: StoreRequestHandler, status: int, retry_after: Optional[float]) -> None:
        headers: dict[str, str] = {}
        if retry_after is not None:
            headers["Retry-After"] = str(int(math.ceil(retry_after)))
        if status == 500:
            data = {"code": "internal_server_error", "message": FATAL_MESSAGE,
                    "data": {"status": 500}, "additional_errors": []}
        elif status == 429:
            wait = int(math.ceil(retry_after)) if retry_after is not None else 1
            data = {"code": "rate_limit_exceeded",
                    "message": f"Too many requests. Please wait {wait} seconds before trying again.",
                    "data": {"status": 429}}
        elif status in (502, 503, 504):
            headers["Content-Type"] = "text/html"
            return self._send(h, status, f"<html><body><h1>{status} {http.client.responses.get(status, '')}"
                                         f"</h1></body></html>".encode(), headers)
        else:
            data = {"code": f"http_{status}", "message": http.client.responses.get(status, "Error"),
                    "data": {"status": status}}
        headers["Content-Type"] = "application/json; charset=UTF-8"
        self._send(h, status, php_json_encode(data).encode("ascii"), headers)

    @staticmethod
    def _send(h: StoreRequestHandler, status: int, payload: bytes, headers: dict, head_only: bool = False) -> None:
        try:
            h.send_response(status)
            for key, value in headers.items():
                h.send_header(key, str(value))
            h.send_header("Content-Length", str(len(payload)))
            h.end_headers()
            if not head_only:
                h.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError, OSError):
            h.close_connection = True
