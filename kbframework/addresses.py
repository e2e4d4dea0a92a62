"""Which destinations may be fetched and which links may be kept: the pure half of the SSRF
guard (see ``kbframework.net`` for the whole story).

It imports no HTTP library, so configuration (``KB_ALLOW_PRIVATE_NETWORK`` is parsed into an
:class:`AddressPolicy` at start-up) and the code that stores or shows links (``safe_link``)
use the same rules as ``net.SafeSession`` without loading ``requests``.

An address is refused when it is private, loopback, link-local, multicast, reserved,
unspecified, shared (CGNAT), documentation/benchmark space, or an IPv6 form embedding such
an IPv4 address (IPv4-mapped, NAT64, 6to4, Teredo); names are resolved and every address
they resolve to is checked, so numeric spellings (``http://2130706433/``) are caught too.
"""
from __future__ import annotations

import ipaddress
import re
import socket
from typing import Any, Iterable, Optional, Union
from urllib.parse import urlsplit

from kbframework.errors import KBError

ALLOWED_SCHEMES = ("http", "https")


# --------------------------------------------------------------------------- errors


class BlockedAddress(KBError):
    """The URL's destination is not allowed (private/loopback/... address, bad scheme)."""

    status = 400
    code = "blocked_address"

    def __init__(self, message: str, *, url: str | None = None, address: str | None = None):
        super().__init__(message)
        self.url = url
        self.address = address

    def as_dict(self) -> dict:
        out = super().as_dict()
        out["details"] = {k: v for k, v in (("url", self.url), ("address", self.address)) if v}
        return out


class UnsupportedScheme(BlockedAddress):
    """Only ``http`` and ``https`` URLs may be fetched."""

    status = 400
    code = "unsupported_scheme"


# ------------------------------------------------------------------ address policy

_IPAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]
_IPNetwork = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]

# Checked in addition to the ``is_*`` flags of ``ipaddress`` (whose lists vary between
# Python versions): special-purpose ranges that are not publicly routable.
_EXTRA_BLOCKED: tuple[_IPNetwork, ...] = tuple(
    ipaddress.ip_network(n)
    for n in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",  # carrier-grade NAT
        "127.0.0.0/8",
        "169.254.0.0/16",  # link-local, cloud metadata
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.88.99.0/24",  # 6to4 relay anycast
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",
        "240.0.0.0/4",
        "255.255.255.255/32",
        "::/128",
        "::1/128",
        "::/96",  # IPv4-compatible (deprecated)
        "64:ff9b:1::/48",  # local-use NAT64
        "100::/64",  # discard
        "2001::/23",  # IETF protocol assignments (incl. Teredo 2001::/32)
        "2001:db8::/32",
        "fc00::/7",  # unique local
        "fe80::/10",  # link-local
        "fec0::/10",  # site-local (deprecated)
        "ff00::/8",  # multicast
    )
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")

# Never reachable through "private networks allowed": link-local (where every cloud's
# instance metadata lives) and the metadata endpoints that sit elsewhere. Only an explicit
# entry in the allowlist opens one of them.
METADATA_NETWORKS: tuple[_IPNetwork, ...] = tuple(
    ipaddress.ip_network(n)
    for n in (
        "169.254.0.0/16",  # link-local: AWS/GCP/Azure/OpenStack/Oracle metadata 169.254.169.254
        "fe80::/10",  # IPv6 link-local
        "fd00:ec2::254/128",  # AWS metadata over IPv6
        "100.100.100.200/32",  # Alibaba Cloud metadata
        "192.0.0.192/32",  # Oracle Cloud (legacy) metadata
    )
)
METADATA_HOSTS = frozenset({
    "metadata", "metadata.google.internal", "metadata.goog", "metadata.azure.internal",
    "instance-data", "instance-data.ec2.internal", "metadata.tencentyun.com",
    "metadata.platformequinix.com",
})


def _same_host_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address *is* (IPv4-mapped ``::ffff:a.b.c.d``, NAT64
    ``64:ff9b::a.b.c.d``): such an address is judged purely as that IPv4 address."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def _tunnelled_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address carried by a 6to4 / Teredo address (blocked if that one is)."""
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    return None


def _ip_is_unsafe(ip: _IPAddress) -> bool:
    if (
        ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
        or not ip.is_global
    ):
        return True
    return any(ip.version == net.version and ip in net for net in _EXTRA_BLOCKED)


def _parse_networks(allowed: Iterable[Any]) -> tuple[tuple[_IPNetwork, ...], frozenset[str]]:
    """Split an allowlist into networks and host names (``ValueError`` for junk)."""
    if isinstance(allowed, (str, bytes)):
        allowed = [allowed]
    nets, hosts = [], set()
    for item in allowed:
        if isinstance(item, (ipaddress.IPv4Network, ipaddress.IPv6Network)):
            nets.append(item)
            continue
        text = str(item).strip()
        if not text:
            continue
        try:
            nets.append(ipaddress.ip_network(text.strip("[]"), strict=False))
        except ValueError:
            host = text.lower().rstrip(".")
            if not _HOST_RE.match(host) or "/" in host:
                raise ValueError(f"{text!r} is neither a network (10.0.0.0/8) nor a host name") from None
            hosts.add(host)
    return tuple(nets), frozenset(hosts)


_HOST_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?)*$")


def _in(ip: _IPAddress, nets: Iterable[_IPNetwork]) -> bool:
    return any(ip.version == net.version and ip in net for net in nets)


class AddressPolicy:
    """Which IP addresses (and host names) may be connected to.

    ``AddressPolicy(False)``: public addresses only. ``AddressPolicy(True)``: private
    ranges too, but not link-local / cloud metadata. ``AddressPolicy({"127.0.0.0/8",
    "wiki.intranet"})``: public addresses plus the listed networks and hosts (a listed
    metadata range is allowed: listing it is the explicit decision).
    ``AddressPolicy(True, {"169.254.169.254/32"})``: both.
    """

    def __init__(self, allow_private: Union[bool, Iterable[Any], "AddressPolicy"] = False,
                 extra: Iterable[Any] = ()):
        if isinstance(allow_private, AddressPolicy):
            self.private, self.allowed, self.hosts = allow_private.private, allow_private.allowed, allow_private.hosts
        elif allow_private is True:
            self.private, self.allowed, self.hosts = True, (), frozenset()
        elif allow_private is False or allow_private is None:
            self.private, self.allowed, self.hosts = False, (), frozenset()
        else:
            self.private = False
            self.allowed, self.hosts = _parse_networks(allow_private)
        if extra:
            nets, hosts = _parse_networks(extra)
            self.allowed, self.hosts = self.allowed + nets, self.hosts | hosts

    # kept for callers that asked "is everything allowed?": nothing ever is any more
    allow_all = False

    @property
    def permits_private(self) -> bool:
        """True if anything beyond public addresses is allowed."""
        return bool(self.private or self.allowed or self.hosts)

    def _key(self) -> tuple:
        return (self.private, tuple(sorted(str(n) for n in self.allowed)), tuple(sorted(self.hosts)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AddressPolicy) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        items = [str(n) for n in self.allowed] + sorted(self.hosts)
        if self.private:
            return f"AddressPolicy(True, {items!r})" if items else "AddressPolicy(True)"
        return f"AddressPolicy({items!r})"

    def _explicitly_allowed(self, ip: _IPAddress) -> bool:
        return _in(ip, self.allowed)

    def _unsafe(self, ip: _IPAddress) -> bool:
        if self._explicitly_allowed(ip):
            return False
        if _in(ip, METADATA_NETWORKS) or ip.is_link_local:
            return True
        if self.private:
            return ip.is_multicast or ip.is_unspecified or ip == ipaddress.ip_address("255.255.255.255")
        return _ip_is_unsafe(ip)

    def is_blocked(self, ip: Union[str, _IPAddress]) -> bool:
        """True if connecting to ``ip`` is not allowed by this policy."""
        if isinstance(ip, str):
            ip = ipaddress.ip_address(ip.split("%", 1)[0])  # drop an IPv6 zone id
        tunnelled = None
        if isinstance(ip, ipaddress.IPv6Address):
            same = _same_host_ipv4(ip)
            if same is not None:
                ip = same
            else:
                tunnelled = _tunnelled_ipv4(ip)
        if self._unsafe(ip):
            return True
        return tunnelled is not None and self._unsafe(tunnelled)

    def host_allowed(self, host: str) -> bool:
        """A host name the allowlist names: whatever it resolves to may be reached."""
        return host.lower().rstrip(".") in self.hosts

    def resolve(self, host: str, port: int, family: int = socket.AF_UNSPEC) -> list[tuple]:
        """Resolve ``host`` and return its addrinfo tuples, or raise :class:`BlockedAddress`
        if *any* address is not allowed. ``socket.gaierror`` propagates unchanged."""
        host = host.strip("[]").rstrip(".")
        named = self.host_allowed(host)
        if not named and host.lower() in METADATA_HOSTS:
            raise BlockedAddress(f"refused: {host!r} is a cloud metadata endpoint", address=host)
        infos = _getaddrinfo(host, port, family, socket.SOCK_STREAM)
        if not infos:
            raise socket.gaierror(f"no addresses for {host!r}")
        if not named:
            for info in infos:
                addr = str(info[4][0])
                if self.is_blocked(addr):
                    raise BlockedAddress(
                        f"refused: {host!r} resolves to {addr}, which is a private, loopback,"
                        " link-local or otherwise non-public address",
                        address=addr,
                    )
        return infos


# ------------------------------------------------------------ links we store and show

MAX_LINK_CHARS = 2048
_LINK_BAD_CHARS = re.compile(r"[\x00-\x20\x7f<>\"`\\]")


def link_problem(url: Any) -> Optional[str]:
    """Why ``url`` may not be stored or shown as a link (None: it may). A link is an absolute
    ``http``/``https`` URL with a host, no whitespace, control or quote characters, at most
    2,048 characters -- no ``javascript:``, ``data:``, ``file:`` or scheme-relative ``//``."""
    if not isinstance(url, str):
        return "not text"
    if not url:
        return "empty"
    if len(url) > MAX_LINK_CHARS:
        return f"longer than {MAX_LINK_CHARS} characters"
    if _LINK_BAD_CHARS.search(url):
        return "contains whitespace, control or quote characters"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises on a bad port)
    except ValueError as exc:
        return f"malformed ({exc})"
    if parts.scheme.lower() not in ALLOWED_SCHEMES:
        return f"the scheme {parts.scheme + ':' if parts.scheme else '(none)'} is not http or https"
    if not parts.hostname:
        return "no host"
    return None


def safe_link(url: Any) -> Optional[str]:
    """``url`` if it is a safe http(s) link (see :func:`link_problem`), else None."""
    if isinstance(url, str):
        url = url.strip()
    return url if link_problem(url) is None else None


# ------------------------------------------------------- who may open private networks


def parse_private_network_setting(value: Optional[str]) -> AddressPolicy:
    """``KB_ALLOW_PRIVATE_NETWORK``: ""/"0" off; "1" private ranges (not link-local or
    metadata); or a comma list of CIDRs and host names ("1" may be one of them, so
    "1,169.254.169.254/32" also opens that one metadata address). ``ValueError`` for junk."""
    text = (value or "").strip()
    if text.lower() in ("", "0", "false", "no", "off"):
        return AddressPolicy(False)
    items = [x.strip() for x in text.replace(";", ",").split(",") if x.strip()]
    private = any(x.lower() in ("1", "true", "yes", "on") for x in items)
    rest = [x for x in items if x.lower() not in ("1", "true", "yes", "on")]
    return AddressPolicy(private, rest)


def _getaddrinfo(host: str, port: int, family: int, socktype: int) -> list[tuple]:
    """The one place that resolves names (tests replace it to simulate DNS)."""
    return socket.getaddrinfo(host, port, family, socktype)


def is_blocked_ip(ip: Union[str, _IPAddress], allow_private: Union[bool, Iterable[Any], AddressPolicy] = False) -> bool:
    """True if ``ip`` may not be connected to under ``allow_private`` (see :class:`AddressPolicy`)."""
    return AddressPolicy(allow_private).is_blocked(ip)


def check_scheme(url: str, scheme: Optional[str] = None) -> str:
    if scheme is None:
        scheme = url.split(":", 1)[0] if ":" in url else ""
    scheme = scheme.strip().lower()
    if scheme not in ALLOWED_SCHEMES:
        raise UnsupportedScheme(f"refused: only http and https URLs are fetched, not {url!r}", url=url)
    return scheme


def check_url(url: str, *, allow_private: Union[bool, Iterable[Any], AddressPolicy] = False) -> None:
    """Raise :class:`UnsupportedScheme` / :class:`BlockedAddress` if ``url`` may not be
    fetched; ``socket.gaierror`` if its host does not resolve. Handy to validate a URL an
    admin typed into a source form."""
    policy = allow_private if isinstance(allow_private, AddressPolicy) else AddressPolicy(allow_private)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise BlockedAddress(f"refused: malformed URL {url!r} ({exc})", url=url) from None
    scheme = check_scheme(url, parts.scheme)
    host = parts.hostname
    if not host:
        raise BlockedAddress(f"refused: URL without a host: {url!r}", url=url)
    try:
        policy.resolve(host, port or (443 if scheme == "https" else 80))
    except BlockedAddress as exc:
        exc.url = url
        raise
