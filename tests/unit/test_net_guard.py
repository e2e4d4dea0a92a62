"""The SSRF guard (kbframework/net.py, its address rules in kbframework/addresses.py) against
a real local HTTP server.

Every server here listens on 127.0.0.1, so tests allow loopback explicitly
(``allow_private={"127.0.0.0/8"}``) and check that everything else stays refused. A
fixture wraps ``socket.connect`` for the whole test: it records each address a socket
connects to and refuses any that is not loopback, so even a broken guard can never send
traffic to 10.x or 169.254.x from this test suite.
"""
from __future__ import annotations

import gzip
import http.server
import json
import shutil
import socket
import ssl
import subprocess
import threading
import time
from urllib.parse import parse_qs, urlsplit

import pytest
import requests

from kbframework import addresses
from kbframework.net import (
    DEFAULT_TIMEOUT,
    USER_AGENT,
    BlockedAddress,
    ResponseTooLarge,
    SafeSession,
    UnsupportedScheme,
    check_url,
    is_blocked_ip,
    safe_get,
)

LOOPBACK = {"127.0.0.0/8"}
FAST = (1.0, 3.0)  # safety net: nothing here should ever wait long


# ------------------------------------------------------------------ local server


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *args):  # keep test output quiet
        pass

    def _send(self, status=200, body=b"", headers=None):
        self.send_response(status)
        headers = dict(headers or {})
        headers.setdefault("Content-Length", str(len(body)))
        for key, value in headers.items():
            if value is not None:
                self.send_header(key, value)
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self):
        self.do_GET()

    def do_POST(self):
        self.do_GET()

    def do_GET(self):
        self.server.hits.append(self.path)
        parts = urlsplit(self.path)
        q = {k: v[0] for k, v in parse_qs(parts.query).items()}
        path = parts.path
        if path == "/ok":
            self._send(body=b"hello", headers={"Content-Type": "text/plain; charset=utf-8"})
        elif path == "/json":
            self._send(body=json.dumps({"name": "Café", "n": 1}).encode(), headers={"Content-Type": "application/json"})
        elif path == "/headers":
            body = json.dumps({k.lower(): v for k, v in self.headers.items()}).encode()
            self._send(body=body, headers={"Content-Type": "application/json"})
        elif path == "/redirect":
            self._send(int(q.get("status", 302)), headers={"Location": q["to"]})
        elif path.startswith("/chain/"):
            n = int(path.rsplit("/", 1)[1])
            if n == 0:
                self._send(body=b"end of chain")
            else:
                self._send(302, headers={"Location": f"/chain/{n - 1}"})
        elif path == "/big":  # announced by Content-Length
            n = int(q["n"])
            self._send(body=b"x" * n)
        elif path == "/stream":  # no Content-Length: read until the server closes
            n = int(q["n"])
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.end_headers()
            sent = 0
            try:
                while sent < n:
                    chunk = b"y" * min(65536, n - sent)
                    self.wfile.write(chunk)
                    sent += len(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass
        elif path == "/gzipbomb":
            body = gzip.compress(b"\0" * 20_000_000)  # ~20 kB on the wire, 20 MB decoded
            self._send(body=body, headers={"Content-Encoding": "gzip"})
        elif path == "/slow":
            self.send_response(200)
            self.end_headers()
            try:
                for _ in range(50):
                    self.wfile.write(b"z")
                    self.wfile.flush()
                    time.sleep(0.1)
            except (BrokenPipeError, ConnectionResetError):
                pass
        else:
            self._send(404, body=b"not found")


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.hits: list[str] = []


def _start(server):
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return thread


@pytest.fixture(scope="module")
def server():
    srv = Server(("127.0.0.1", 0), Handler)
    _start(srv)
    srv.base = f"http://127.0.0.1:{srv.server_address[1]}"
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture(autouse=True)
def connect_log(monkeypatch):
    """Record every socket.connect; refuse anything that is not loopback."""
    log: list[str] = []
    real_connect = socket.socket.connect

    def guarded_connect(sock, address):
        host = address[0] if isinstance(address, tuple) else str(address)
        log.append(host)
        if sock.family in (socket.AF_INET, socket.AF_INET6) and host not in ("127.0.0.1", "::1"):
            raise OSError(f"test safety net: refusing to connect to {host}")
        return real_connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    return log


@pytest.fixture
def fake_dns(monkeypatch):
    """Names the test controls: ``fake_dns["name"] = ["1.2.3.4", ...]`` (a list of
    answers is returned one per lookup, the last repeating)."""
    table: dict[str, list[str]] = {}
    calls: list[str] = []
    real = addresses._getaddrinfo

    def fake(host, port, family, socktype):
        if host in table:
            calls.append(host)
            answers = table[host]
            ip = answers.pop(0) if len(answers) > 1 else answers[0]
            fam = socket.AF_INET6 if ":" in ip else socket.AF_INET
            sa = (ip, port, 0, 0) if fam == socket.AF_INET6 else (ip, port)
            return [(fam, socket.SOCK_STREAM, 6, "", sa)]
        return real(host, port, family, socktype)

    monkeypatch.setattr(addresses, "_getaddrinfo", fake)
    return _DNS(table, calls)


class _DNS:
    def __init__(self, table, calls):
        self.table = table
        self.calls = calls

    def __setitem__(self, name, answers):
        self.table[name] = list(answers)


# ------------------------------------------------------------ refused by default


def test_loopback_refused_by_default(server, connect_log):
    before = len(server.hits)
    with pytest.raises(BlockedAddress) as info:
        safe_get(server.base + "/ok", timeout=FAST)
    assert info.value.address == "127.0.0.1"
    assert len(server.hits) == before
    assert connect_log == []  # refused before any socket was opened


@pytest.mark.parametrize(
    "host",
    [
        "localhost",
        "127.0.0.1",
        "127.1",
        "2130706433",  # 127.0.0.1 as one number
        "0x7f.0.0.1",
        "[::1]",
        "[::ffff:127.0.0.1]",
        "0.0.0.0",
        "169.254.169.254",
        "10.0.0.1",
        "192.168.1.1",
        "172.16.0.1",
        "100.64.0.1",
        "224.0.0.1",
        "[fd00::1]",
        "[fe80::1]",
    ],
)
def test_private_destinations_refused(host, connect_log):
    url = f"http://{host}:8080/latest/meta-data/"
    with pytest.raises(BlockedAddress):
        safe_get(url, timeout=FAST)
    with pytest.raises(BlockedAddress):
        check_url(url)
    assert connect_log == []


def test_loopback_allowed_with_allow_private_true(server):
    r = safe_get(server.base + "/ok", allow_private=True, timeout=FAST)
    assert r.status_code == 200
    assert r.content == b"hello"
    assert r.text == "hello"
    assert r.url == server.base + "/ok"
    assert r.headers["Content-Type"].startswith("text/plain")


def test_loopback_allowed_by_network_and_json(server):
    r = safe_get(server.base + "/json", allow_private=LOOPBACK, params={"q": "x y"}, timeout=FAST)
    assert r.status_code == 200
    assert r.json() == {"name": "Café", "n": 1}
    assert r.url.endswith("/json?q=x+y")


def test_allowed_network_does_not_open_others(connect_log):
    with pytest.raises(BlockedAddress):
        safe_get("http://10.0.0.1/", allow_private=LOOPBACK, timeout=FAST)
    with pytest.raises(BlockedAddress):
        safe_get("http://[::1]/", allow_private=LOOPBACK, timeout=FAST)
    assert connect_log == []


def test_http_errors_are_returned_not_raised(server):
    r = safe_get(server.base + "/missing", allow_private=LOOPBACK, timeout=FAST)
    assert r.status_code == 404 and r.text == "not found"


# --------------------------------------------------------------------- redirects


@pytest.mark.parametrize(
    "target",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/",
        "http://[::ffff:10.0.0.1]/",
        "http://192.168.0.1:8080/admin",
        "http://0.0.0.0/",
    ],
)
def test_redirect_to_private_network_refused_before_connecting(server, connect_log, target):
    with pytest.raises(BlockedAddress):
        safe_get(server.base + "/redirect", params={"to": target}, allow_private=LOOPBACK, timeout=FAST)
    # the first hop (allowed loopback) connected; nothing else was even attempted
    assert set(connect_log) == {"127.0.0.1"}


def test_redirect_out_of_the_allowed_network_refused(server, fake_dns, connect_log):
    # Only 127.0.0.1/32 is allowed: a redirect to another loopback address is refused.
    fake_dns["public.example"] = ["127.0.0.1"]
    port = server.server_address[1]
    with pytest.raises(BlockedAddress) as info:
        safe_get(
            f"http://public.example:{port}/redirect",
            params={"to": f"http://127.0.0.2:{port}/ok"},
            allow_private={"127.0.0.1/32"},
            timeout=FAST,
        )
    assert info.value.address == "127.0.0.2"
    assert "127.0.0.2" not in connect_log


@pytest.mark.parametrize("target", ["file:///etc/passwd", "gopher://127.0.0.1:6379/_INFO", "ftp://example.com/x"])
def test_redirect_to_other_scheme_refused(server, target):
    with pytest.raises(UnsupportedScheme):
        safe_get(server.base + "/redirect", params={"to": target}, allow_private=LOOPBACK, timeout=FAST)


def test_allowed_redirect_followed_with_history(server):
    r = safe_get(server.base + "/redirect", params={"to": "/ok", "status": "301"}, allow_private=LOOPBACK, timeout=FAST)
    assert r.status_code == 200 and r.text == "hello"
    assert r.url == server.base + "/ok"
    assert [h.status_code for h in r.history] == [301]


def test_five_redirects_followed_six_refused(server):
    r = safe_get(server.base + "/chain/5", allow_private=LOOPBACK, timeout=FAST)
    assert r.text == "end of chain" and len(r.history) == 5
    with pytest.raises(requests.TooManyRedirects):
        safe_get(server.base + "/chain/6", allow_private=LOOPBACK, timeout=FAST)


def test_no_redirects_when_disabled(server):
    with SafeSession(allow_private=LOOPBACK) as s:
        r = s.get(server.base + "/redirect", params={"to": "http://10.0.0.1/"}, allow_redirects=False, timeout=FAST)
    assert r.status_code == 302 and r.headers["Location"] == "http://10.0.0.1/"


def test_authorization_dropped_when_redirect_changes_host(server, fake_dns):
    port = server.server_address[1]
    fake_dns["other.test"] = ["127.0.0.1"]
    target = f"http://other.test:{port}/headers"
    r = safe_get(server.base + "/redirect", params={"to": target}, auth=("user", "app-password"),
                 allow_private=LOOPBACK, timeout=FAST)
    seen = r.json()
    assert "authorization" not in seen
    # and the pinned connection still sends the name in the Host header
    assert seen["host"] == f"other.test:{port}"
    # same host: kept
    r = safe_get(server.base + "/redirect", params={"to": "/headers"}, auth=("user", "app-password"),
                 allow_private=LOOPBACK, timeout=FAST)
    assert r.json()["authorization"].startswith("Basic ")


# ------------------------------------------------------------------ DNS rebinding


def test_dns_rebinding_is_caught_at_connect_time(server, fake_dns, connect_log):
    """The first lookup (the pre-flight check) answers loopback, which this test allows;
    the second (made when connecting) answers 10.0.0.1. The connection layer checks the
    address it is about to connect to, so the request is refused and 10.0.0.1 is never
    contacted."""
    port = server.server_address[1]
    fake_dns["rebind.test"] = ["127.0.0.1", "10.0.0.1"]
    with pytest.raises(BlockedAddress) as info:
        safe_get(f"http://rebind.test:{port}/ok", allow_private=LOOPBACK, timeout=FAST)
    assert info.value.address == "10.0.0.1"
    assert fake_dns.calls == ["rebind.test", "rebind.test"]
    assert connect_log == []


def test_connection_goes_to_the_checked_address(server, fake_dns):
    port = server.server_address[1]
    fake_dns["shop.test"] = ["127.0.0.1"]
    r = safe_get(f"http://shop.test:{port}/headers", allow_private=LOOPBACK, timeout=FAST)
    assert r.json()["host"] == f"shop.test:{port}"


def test_send_of_a_prepared_request_is_guarded_too(server):
    with SafeSession() as s:
        prepared = requests.Request("GET", server.base + "/ok").prepare()
        with pytest.raises(BlockedAddress):
            s.send(prepared, timeout=FAST)


# ------------------------------------------------------------------------- size cap


def test_size_cap_by_content_length(server):
    before = len(server.hits)
    with pytest.raises(ResponseTooLarge):
        safe_get(server.base + "/big", params={"n": 5000}, max_bytes=4999, allow_private=LOOPBACK, timeout=FAST)
    assert len(server.hits) == before + 1
    r = safe_get(server.base + "/big", params={"n": 5000}, max_bytes=5000, allow_private=LOOPBACK, timeout=FAST)
    assert len(r.content) == 5000


def test_size_cap_while_streaming(server):
    with pytest.raises(ResponseTooLarge):
        safe_get(server.base + "/stream", params={"n": 3_000_000}, max_bytes=1_000_000, allow_private=LOOPBACK, timeout=FAST)
    r = safe_get(server.base + "/stream", params={"n": 300_000}, max_bytes=1_000_000, allow_private=LOOPBACK, timeout=FAST)
    assert len(r.content) == 300_000


def test_size_cap_applies_to_decoded_body(server):
    with pytest.raises(ResponseTooLarge):
        safe_get(server.base + "/gzipbomb", max_bytes=1_000_000, allow_private=LOOPBACK, timeout=FAST)


def test_size_cap_per_call_on_a_session(server):
    with SafeSession(allow_private=LOOPBACK, max_bytes=100) as s:
        with pytest.raises(ResponseTooLarge):
            s.get(server.base + "/big", params={"n": 1000}, timeout=FAST)
        assert len(s.get(server.base + "/big", params={"n": 1000}, max_bytes=1000, timeout=FAST).content) == 1000


def test_total_time_limit(server):
    with SafeSession(allow_private=LOOPBACK, total_timeout=0.5) as s:
        start = time.monotonic()
        with pytest.raises(requests.exceptions.Timeout):
            s.get(server.base + "/slow", timeout=FAST)
        assert time.monotonic() - start < 3


# -------------------------------------------------------------- schemes, defaults


@pytest.mark.parametrize(
    "url",
    ["file:///etc/passwd", "ftp://example.com/", "gopher://example.com/", "javascript:alert(1)",
     "dict://127.0.0.1:11211/", "127.0.0.1:8080/ok", "//example.com/x"],
)
def test_non_http_scheme_refused(url, connect_log):
    with pytest.raises(UnsupportedScheme):
        safe_get(url, allow_private=True, timeout=FAST)
    with SafeSession(allow_private=True) as s:
        with pytest.raises(UnsupportedScheme):
            s.post(url, data={"a": 1})
    assert connect_log == []


def test_user_agent_and_default_timeout(server, monkeypatch):
    seen = {}
    real_send = requests.adapters.HTTPAdapter.send

    def spy(self, request, **kwargs):
        seen["timeout"] = kwargs.get("timeout")
        return real_send(self, request, **kwargs)

    monkeypatch.setattr(requests.adapters.HTTPAdapter, "send", spy)
    with SafeSession(allow_private=LOOPBACK) as s:
        r = s.get(server.base + "/headers")
    assert seen["timeout"] == DEFAULT_TIMEOUT == (5.0, 20.0)
    assert r.json()["user-agent"] == USER_AGENT
    assert USER_AGENT.startswith("kbframework/") and USER_AGENT.endswith(" (+knowledge sync)")


def test_environment_proxy_ignored_and_explicit_proxy_refused(server, monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://10.9.9.9:3128")
    monkeypatch.setenv("http_proxy", "http://10.9.9.9:3128")
    r = safe_get(server.base + "/ok", allow_private=LOOPBACK, timeout=FAST)
    assert r.text == "hello"
    with SafeSession(allow_private=LOOPBACK) as s:
        with pytest.raises(ValueError):
            s.get(server.base + "/ok", proxies={"http": "http://10.9.9.9:3128"})


def test_unresolvable_host_is_a_connection_error(monkeypatch):
    def fail(host, port, family, socktype):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(addresses, "_getaddrinfo", fail)
    with pytest.raises(requests.ConnectionError):
        safe_get("http://no-such-host.invalid/", timeout=FAST)
    with pytest.raises(socket.gaierror):
        check_url("http://no-such-host.invalid/")


# ------------------------------------------------------------------- IP rules


@pytest.mark.parametrize(
    "ip,blocked",
    [
        ("8.8.8.8", False),
        ("1.1.1.1", False),
        ("2606:4700:4700::1111", False),
        ("::ffff:8.8.8.8", False),  # IPv4-mapped public
        ("64:ff9b::808:808", False),  # NAT64 of a public address
        ("127.0.0.1", True),
        ("127.255.255.254", True),
        ("10.1.2.3", True),
        ("172.31.255.255", True),
        ("192.168.0.1", True),
        ("169.254.169.254", True),
        ("100.100.100.200", True),  # CGNAT / Alibaba metadata
        ("0.0.0.0", True),
        ("255.255.255.255", True),
        ("224.0.0.251", True),
        ("240.0.0.1", True),
        ("192.0.2.1", True),
        ("198.18.0.1", True),
        ("::", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("::ffff:169.254.169.254", True),
        ("::127.0.0.1", True),  # IPv4-compatible
        ("64:ff9b::a00:1", True),  # NAT64 of 10.0.0.1
        ("2002:a00:1::1", True),  # 6to4 of 10.0.0.1
        ("fe80::1", True),
        ("fe80::1%eth0", True),
        ("fd12:3456::1", True),
        ("ff02::1", True),
        ("2001:db8::1", True),
    ],
)
def test_ip_rules(ip, blocked):
    assert is_blocked_ip(ip) is blocked
    # "private networks allowed" still refuses link-local, cloud metadata and multicast
    never = {"169.254.169.254", "100.100.100.200", "::ffff:169.254.169.254", "fe80::1", "fe80::1%eth0",
             "255.255.255.255", "224.0.0.251", "ff02::1", "0.0.0.0", "::"}
    assert is_blocked_ip(ip, allow_private=True) is (ip in never)


def test_allowed_networks():
    assert not is_blocked_ip("127.0.0.1", {"127.0.0.0/8"})
    assert not is_blocked_ip("::ffff:127.0.0.1", {"127.0.0.0/8"})
    assert is_blocked_ip("10.0.0.1", {"127.0.0.0/8"})
    assert not is_blocked_ip("10.1.2.3", ["10.1.2.0/24"])
    assert is_blocked_ip("10.1.3.3", "10.1.2.0/24")
    with pytest.raises(ValueError):  # neither a network nor a host name (host names are allowed)
        is_blocked_ip("10.0.0.1", {"10.0.0.0/33"})
    with pytest.raises(ValueError):
        is_blocked_ip("10.0.0.1", {"not a host!"})


# ------------------------------------------------------------ HTTPS with pinning


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    if not shutil.which("openssl"):
        pytest.skip("openssl not available to make a test certificate")
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "2", "-subj", "/CN=secure.test", "-addext", "subjectAltName=DNS:secure.test"],
        check=True, capture_output=True,
    )
    srv = Server(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(cert), str(key))
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    _start(srv)
    srv.port = srv.server_address[1]
    srv.cert = str(cert)
    yield srv
    srv.shutdown()
    srv.server_close()


def test_https_pinned_connection_keeps_sni_and_certificate_check(tls_server, fake_dns):
    fake_dns["secure.test"] = ["127.0.0.1"]
    with SafeSession(allow_private=LOOPBACK) as s:
        r = s.get(f"https://secure.test:{tls_server.port}/headers", verify=tls_server.cert, timeout=FAST)
        assert r.status_code == 200
        assert r.json()["host"] == f"secure.test:{tls_server.port}"
        # the certificate is checked against the URL's name, not the pinned IP
        with pytest.raises(requests.exceptions.SSLError):
            s.get(f"https://127.0.0.1:{tls_server.port}/ok", verify=tls_server.cert, timeout=FAST)
