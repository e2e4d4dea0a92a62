"""Outbound HTTP that refuses private networks (an SSRF guard).

Every URL a connector fetches comes, in the end, from an admin's form (a shop URL, a
sitemap URL, a PDF link found in a page, a ``Location`` header sent by that site).
``SafeSession`` makes sure such a URL cannot be used to reach the platform's own network:
the metadata service at ``169.254.169.254``, the database on ``10.x``, Redis on
``127.0.0.1``...

How it works (two layers, both on every request and every redirect hop):

1. **Pre-flight** -- before a request (and before each redirect hop, which
   ``SafeSession`` follows itself, at most ``max_redirects`` = 5): the scheme must be
   ``http`` or ``https``; the host is resolved with ``socket.getaddrinfo`` and the
   request is refused with :class:`BlockedAddress` if *any* resolved address is
   private, loopback, link-local, multicast, reserved, unspecified, shared (CGNAT),
   documentation/benchmark space, or an IPv6 form embedding such an IPv4 address
   (IPv4-mapped ``::ffff:a.b.c.d``, NAT64 ``64:ff9b::/96``, 6to4 ``2002::/16``, Teredo).
   Numeric tricks (``http://2130706433/``, ``http://0x7f.1/``, ``[::ffff:127.0.0.1]``)
   are caught because the *resolved* addresses are checked, not the spelling.

2. **Connect time (DNS pinning)** -- the HTTP adapter mounted on the session uses
   urllib3 connection classes whose ``_new_conn`` resolves the host once, checks every
   address with the same rules, and opens the socket to *that checked address*. So the
   DNS-rebinding gap (a name that answers a public IP to the check and ``127.0.0.1`` to
   the connect) is closed: what is checked is what is connected to. Only the socket
   target changes; the ``Host`` header, TLS SNI and certificate verification still use
   the host name from the URL. This layer also covers a caller that uses
   ``session.send()`` directly.

Also enforced: a default timeout (connect 5 s, read 20 s) plus an overall time limit
for reading a body; a maximum body size (the body is streamed and reading stops at
``max_bytes`` with :class:`ResponseTooLarge`; the limit applies to the *decoded* body, so
a gzip bomb is stopped too); the ``User-Agent`` ``kbframework/<version> (+knowledge
sync)``; environment proxies and ``.netrc`` are ignored (``trust_env = False``) and
explicit proxies are refused, because a proxy would do its own resolution. The
``Authorization`` header is dropped when a redirect leaves the original host (requests'
rule).

``allow_private`` may be ``False`` (default: only public addresses), ``True`` (private
ranges too -- for an on-premises deployment that syncs an intranet site -- but never
link-local or cloud metadata addresses), an iterable of networks or host names
(``{"127.0.0.0/8", "10.1.2.0/24", "wiki.intranet"}``) allowed in addition to public
addresses, or an :class:`AddressPolicy`. Link-local (``169.254.0.0/16``, ``fe80::/10``)
and the cloud metadata endpoints (``fd00:ec2::254``, ``100.100.100.200``,
``metadata.google.internal``...) are reachable only when listed explicitly.

Who decides is the operator, not a tenant: :func:`operator_policy` reads
``KB_ALLOW_PRIVATE_NETWORK`` and :func:`organization_policy` narrows it by the
organization's ``allow_private_network`` switch when ``KB_TENANT_PRIVATE_NETWORK=1``
delegates that switch.

The address rules themselves (``AddressPolicy``, ``check_url``, ``safe_link``) live in
``kbframework.addresses``, which imports no HTTP library; they are re-exported here.

Known limits: the response body is always read into memory (up to ``max_bytes``), so
``stream=True`` is accepted but has no effect; ports are not restricted (a public host's
port 25 can be reached -- the request is still HTTP).
"""
from __future__ import annotations

import socket
import sys
import time
from datetime import timedelta
from functools import lru_cache
from typing import Any, Iterable, Mapping, Optional, Union

import requests
from requests.adapters import HTTPAdapter
from requests.cookies import extract_cookies_to_jar
from requests.hooks import dispatch_hook
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import (
    ConnectTimeoutError,
    DecodeError,
    NameResolutionError,
    NewConnectionError,
    ProtocolError,
    ReadTimeoutError,
)
from urllib3.exceptions import SSLError as Urllib3SSLError
from urllib3.util.connection import allowed_gai_family

from kbframework.addresses import (  # noqa: F401  (the guard's rules, re-exported for callers of net)
    METADATA_HOSTS,
    METADATA_NETWORKS,
    AddressPolicy,
    BlockedAddress,
    UnsupportedScheme,
    check_scheme,
    check_url,
    is_blocked_ip,
    safe_link,
)
from kbframework.config import get_config
from kbframework.errors import KBError

__all__ = [
    "BlockedAddress",
    "UnsupportedScheme",
    "ResponseTooLarge",
    "AddressPolicy",
    "SafeSession",
    "safe_get",
    "check_url",
    "is_blocked_ip",
    "operator_policy",
    "safe_link",
    "organization_policy",
    "METADATA_NETWORKS",
    "METADATA_HOSTS",
    "USER_AGENT",
    "DEFAULT_TIMEOUT",
    "DEFAULT_MAX_BYTES",
]

DEFAULT_TIMEOUT = (5.0, 20.0)  # (connect, read) seconds
DEFAULT_MAX_BYTES = 10_000_000
DEFAULT_TOTAL_TIMEOUT = 120.0  # seconds to read one body, all chunks together
MAX_REDIRECTS = 5


def _version() -> str:
    try:
        from kbframework import __version__  # type: ignore[attr-defined]

        return str(__version__)
    except ImportError:
        pass
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version("kbframework")
    except PackageNotFoundError:
        return "0"


USER_AGENT = f"kbframework/{_version()} (+knowledge sync)"


# --------------------------------------------------------------------------- errors


class ResponseTooLarge(KBError):
    """The response body is larger than the allowed ``max_bytes``."""

    status = 502
    code = "response_too_large"

    def __init__(self, message: str, *, url: str | None = None, max_bytes: int | None = None):
        super().__init__(message, details={"url": url, "max_bytes": max_bytes})
        self.url = url
        self.max_bytes = max_bytes


# ------------------------------------------------------- who may open private networks


def operator_policy() -> AddressPolicy:
    """What the operator allows on this instance (the environment; no tenant can change it)."""
    return get_config().private_network_policy


def private_network_delegated() -> bool:
    """``KB_TENANT_PRIVATE_NETWORK=1``: each organization's admin may switch the operator's
    allowance on for their organization (it stays off until they do)."""
    return bool(get_config().tenant_private_network)


def organization_policy(extra: Optional[Mapping[str, Any]]) -> AddressPolicy:
    """The policy one organization's connectors get: the operator's allowance, narrowed to
    nothing unless the organization switched ``allow_private_network`` on -- when the
    operator delegated that switch. Without delegation the organization's value is ignored."""
    base = operator_policy()
    if not base.permits_private:
        return base
    if private_network_delegated() and (extra or {}).get("allow_private_network") is not True:
        return AddressPolicy(False)
    return base


# ------------------------------------------------------ connect-time pinning (urllib3)


def _guarded_create_connection(policy: AddressPolicy, address, timeout, source_address, socket_options):
    """urllib3's ``create_connection``, but it checks the addresses it connects to."""
    host, port = address
    infos = policy.resolve(host, port, allowed_gai_family())  # raises BlockedAddress
    err: Optional[OSError] = None
    for af, socktype, proto, _canon, sa in infos:
        sock = None
        try:
            sock = socket.socket(af, socktype, proto)
            for opt in socket_options or ():
                sock.setsockopt(*opt)
            if timeout is None or isinstance(timeout, (int, float)):  # else urllib3's "default" sentinel
                sock.settimeout(timeout)
            if source_address:
                sock.bind(source_address)
            sock.connect(sa)
            return sock
        except OSError as exc:
            err = exc
            if sock is not None:
                sock.close()
    assert err is not None
    raise err


class _GuardedConnectionMixin:
    _kb_policy: AddressPolicy  # set on the per-policy subclasses

    def _new_conn(self):  # type: ignore[override]
        dns_host = getattr(self, "_dns_host", None) or self.host  # type: ignore[attr-defined]
        try:
            sock = _guarded_create_connection(
                self._kb_policy,
                (dns_host, self.port),  # type: ignore[attr-defined]
                self.timeout,  # type: ignore[attr-defined]
                self.source_address,  # type: ignore[attr-defined]
                self.socket_options,  # type: ignore[attr-defined]
            )
        except BlockedAddress:
            raise
        except socket.gaierror as exc:
            raise NameResolutionError(self.host, self, exc) from exc  # type: ignore[attr-defined,arg-type]
        except socket.timeout as exc:
            raise ConnectTimeoutError(
                self, f"Connection to {self.host} timed out. (connect timeout={self.timeout})"  # type: ignore[attr-defined]
            ) from exc
        except OSError as exc:
            raise NewConnectionError(self, f"Failed to establish a new connection: {exc}") from exc  # type: ignore[arg-type]
        sys.audit("http.client.connect", self, self.host, self.port)  # type: ignore[attr-defined]
        return sock


@lru_cache(maxsize=64)
def _pool_classes(policy: AddressPolicy) -> dict[str, type]:
    http_conn = type("GuardedHTTPConnection", (_GuardedConnectionMixin, HTTPConnection), {"_kb_policy": policy})
    https_conn = type("GuardedHTTPSConnection", (_GuardedConnectionMixin, HTTPSConnection), {"_kb_policy": policy})
    return {
        "http": type("GuardedHTTPConnectionPool", (HTTPConnectionPool,), {"ConnectionCls": http_conn}),
        "https": type("GuardedHTTPSConnectionPool", (HTTPSConnectionPool,), {"ConnectionCls": https_conn}),
    }


class _GuardedAdapter(HTTPAdapter):
    def __init__(self, policy: AddressPolicy, **kwargs: Any):
        self._kb_policy = policy
        super().__init__(**kwargs)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _pool_classes(self._kb_policy)

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any):
        raise ValueError("proxies are not supported by SafeSession")


# ------------------------------------------------------------------------- session


class SafeSession(requests.Session):
    """A ``requests.Session`` that refuses non-public destinations (see module doc).

    ``SafeSession(allow_private=False, max_bytes=10_000_000, timeout=(5, 20))``; every
    request method also accepts ``max_bytes=`` for that one call. Responses come back
    with their body already read (``.content``, ``.text``, ``.json()`` work).
    """

    def __init__(
        self,
        *,
        allow_private: Union[bool, Iterable[Any], AddressPolicy] = False,
        max_bytes: int = DEFAULT_MAX_BYTES,
        timeout: Any = DEFAULT_TIMEOUT,
        total_timeout: Optional[float] = DEFAULT_TOTAL_TIMEOUT,
        max_redirects: int = MAX_REDIRECTS,
    ):
        super().__init__()
        self.policy = AddressPolicy(allow_private)
        self.max_bytes = int(max_bytes)
        self.timeout = timeout
        self.total_timeout = total_timeout
        self.max_redirects = max_redirects
        self.trust_env = False  # no environment proxies, no .netrc
        self.headers["User-Agent"] = USER_AGENT
        self.adapters.clear()
        self.mount("https://", _GuardedAdapter(self.policy))
        self.mount("http://", _GuardedAdapter(self.policy))

    # requests.Session.request, plus max_bytes (passed down to every redirect hop)
    def request(  # type: ignore[override]
        self,
        method: str,
        url: str,
        params: Any = None,
        data: Any = None,
        headers: Optional[Mapping[str, str]] = None,
        cookies: Any = None,
        files: Any = None,
        auth: Any = None,
        timeout: Any = None,
        allow_redirects: bool = True,
        proxies: Optional[Mapping[str, str]] = None,
        hooks: Any = None,
        stream: Optional[bool] = None,
        verify: Any = None,
        cert: Any = None,
        json: Any = None,
        *,
        max_bytes: Optional[int] = None,
    ) -> requests.Response:
        if proxies:
            raise ValueError("proxies are not supported by SafeSession")
        # A non-http scheme must not even reach requests (the address check is in send()).
        check_scheme(str(url))
        req = requests.Request(
            method=method.upper(),
            url=url,
            headers=headers,
            files=files,
            data=data or {},
            json=json,
            params=params or {},
            auth=auth,
            cookies=cookies,
            hooks=hooks,
        )
        prep = self.prepare_request(req)
        settings = self.merge_environment_settings(prep.url, {}, stream, verify, cert)
        return self.send(
            prep,
            timeout=timeout,
            allow_redirects=allow_redirects,
            max_bytes=max_bytes,
            **settings,
        )

    def _check(self, url: str) -> None:
        try:
            check_url(url, allow_private=self.policy)
        except socket.gaierror as exc:  # same error type as a failed connection
            raise requests.exceptions.ConnectionError(f"cannot resolve the host of {url}: {exc}") from exc

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        """Send one prepared request; follow redirects (each hop checked) if allowed."""
        if isinstance(request, requests.Request):
            raise ValueError("You can only send PreparedRequests.")
        allow_redirects = kwargs.pop("allow_redirects", True)
        max_bytes = kwargs.pop("max_bytes", None) or self.max_bytes
        deadline = kwargs.pop("_kb_deadline", None)
        kwargs.pop("stream", None)  # bodies are always streamed, capped, then preloaded
        if kwargs.get("proxies"):
            raise ValueError("proxies are not supported by SafeSession")
        kwargs["proxies"] = {}
        kwargs.setdefault("verify", self.verify)
        kwargs.setdefault("cert", self.cert)
        if kwargs.get("timeout") is None:
            kwargs["timeout"] = self.timeout
        if deadline is None and self.total_timeout:
            deadline = time.monotonic() + self.total_timeout

        # 1. pre-flight: scheme + resolve + check, before any connection is made
        self._check(request.url or "")

        # 2. send (the adapter re-checks the address it connects to) and read, capped
        adapter = self.get_adapter(url=request.url or "")
        start = time.perf_counter()
        resp = adapter.send(request, stream=True, **kwargs)
        try:
            _read_capped(resp, max_bytes, deadline)
        except BaseException:
            resp.close()
            raise
        resp.elapsed = timedelta(seconds=time.perf_counter() - start)
        resp = dispatch_hook("response", request.hooks, resp, stream=True, **kwargs)
        extract_cookies_to_jar(self.cookies, request, resp.raw)

        # 3. redirects: requests' own logic (auth stripped on host change, 303 -> GET,
        #    max_redirects), but every hop comes back through this method.
        if allow_redirects:
            history = list(
                self.resolve_redirects(
                    resp, request, max_bytes=max_bytes, _kb_deadline=deadline, **kwargs
                )
            )
            if history:
                history.insert(0, resp)
                resp = history.pop()
                resp.history = history
        return resp


def _iter_body(resp: requests.Response):
    """Decoded body chunks as they arrive (``read1``: no waiting for a full 64 kB chunk,
    so the overall time limit is checked often); errors mapped like requests does."""
    read1 = getattr(resp.raw, "read1", None)
    if read1 is None:  # not a urllib3 2.x response
        yield from resp.iter_content(64 * 1024)
        return
    try:
        while True:
            chunk = read1(64 * 1024, decode_content=True)
            if not chunk:
                return
            yield chunk
    except ProtocolError as exc:
        raise requests.exceptions.ChunkedEncodingError(exc) from exc
    except DecodeError as exc:
        raise requests.exceptions.ContentDecodingError(exc) from exc
    except ReadTimeoutError as exc:
        raise requests.exceptions.ConnectionError(exc) from exc
    except Urllib3SSLError as exc:
        raise requests.exceptions.SSLError(exc) from exc


def _read_capped(resp: requests.Response, max_bytes: int, deadline: Optional[float]) -> None:
    """Read the body of a streamed response into ``resp._content``, at most ``max_bytes``."""
    declared = resp.headers.get("Content-Length", "").strip()
    if declared.isdigit() and int(declared) > max_bytes and "content-encoding" not in resp.headers:
        raise ResponseTooLarge(
            f"response of {declared} bytes from {resp.url} exceeds the limit of {max_bytes} bytes",
            url=resp.url,
            max_bytes=max_bytes,
        )
    buf = bytearray()
    for chunk in _iter_body(resp):
        buf += chunk
        if len(buf) > max_bytes:
            raise ResponseTooLarge(
                f"response from {resp.url} exceeds the limit of {max_bytes} bytes",
                url=resp.url,
                max_bytes=max_bytes,
            )
        if deadline is not None and time.monotonic() > deadline:
            raise requests.exceptions.Timeout(f"reading the response from {resp.url} took too long")
    resp._content = bytes(buf)  # type: ignore[attr-defined]
    resp._content_consumed = True  # type: ignore[attr-defined]
    release = getattr(resp.raw, "release_conn", None)
    if release is not None:
        release()


def safe_get(
    url: str,
    *,
    allow_private: Union[bool, Iterable[Any], AddressPolicy] = False,
    params: Any = None,
    headers: Optional[Mapping[str, str]] = None,
    auth: Any = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    timeout: Any = DEFAULT_TIMEOUT,
) -> requests.Response:
    """GET ``url`` with the guard (one throw-away :class:`SafeSession`).

    Returns a ``requests.Response`` whose body is already read: ``.status_code``,
    ``.headers``, ``.content``, ``.text``, ``.json()``, ``.url`` (after redirects).
    Raises :class:`BlockedAddress` / :class:`UnsupportedScheme` /
    :class:`ResponseTooLarge`, or requests' own exceptions (``ConnectionError``,
    ``Timeout``, ``TooManyRedirects``). HTTP error statuses are returned, not raised.
    """
    with SafeSession(allow_private=allow_private, max_bytes=max_bytes, timeout=timeout) as session:
        return session.get(url, params=params, headers=headers, auth=auth)


class PerThreadSessions:
    """One SafeSession per thread (a requests session is not safe to share between the
    threads of a concurrent crawl), made by ``factory`` on first use and closed together."""

    def __init__(self, factory):
        import threading

        self._factory = factory
        self._local = threading.local()
        self._lock = threading.Lock()
        self._sessions: list[SafeSession] = []

    def get(self) -> SafeSession:
        s = getattr(self._local, "session", None)
        if s is None:
            s = self._local.session = self._factory()
            with self._lock:
                self._sessions.append(s)
        return s

    def close(self) -> None:
        import threading

        with self._lock:
            for s in self._sessions:
                s.close()
            self._sessions.clear()
        self._local = threading.local()
