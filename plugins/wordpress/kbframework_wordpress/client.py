"""A small WordPress REST API client on kbframework's SSRF-guarded HTTP session.

* Every request goes through ``kbframework.net.SafeSession``: private, loopback and
  link-local addresses are refused (after DNS resolution, on every redirect) unless the
  organization allows them (``SyncContext.allow_private_network``).
* ``/wp-json/<route>``; a site without pretty permalinks (404 there) is retried once with
  ``/?rest_route=<route>`` and that mode is kept.
* Auth: application password (HTTP Basic ``user:password``) or ``Authorization: Bearer``.
  WordPress answers *public* endpoints with 200 even when the credentials are wrong (it
  falls back to anonymous), so ``check_credentials`` asks ``/wp/v2/users/me``.
* Failures become ``SourceUnavailable`` (site down, timeout, 5xx, not JSON) or
  ``ConnectorAuthError`` (401/403), with the reason a human can act on.
"""
from __future__ import annotations

import json
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator, Optional

import requests

from kbframework import ConnectorAuthError, KBError, SourceUnavailable
from kbframework import BlockedAddress, PerThreadSessions, ResponseTooLarge, SafeSession
from kbframework_wordpress.schema import effective_auth

MAX_RESPONSE_BYTES = 50_000_000
EMBED = "wp:featuredmedia,wp:term"  # one item (webhook)
LIST_EMBED = "wp:featuredmedia"  # lists: term names come from a per-sync cache (see attach_terms)


class NotFoundOnSite(KBError):
    status = 404
    code = "wp_not_found"


class WPClient:
    def __init__(self, config: dict, *, allow_private=False, log=lambda m: None):
        self.base = str(config["base_url"]).rstrip("/")
        self.config = config
        self.allow_private = allow_private
        self.log = log
        t = float(config.get("timeout_seconds") or 30)
        self.timeout = (min(10.0, t), t)
        self.auth_kind = effective_auth(config)
        self.rest_mode: Optional[str] = None  # "pretty" (/wp-json) | "query" (?rest_route=)
        self._sessions = PerThreadSessions(self._new_session)
        self._lock = threading.Lock()
        self._taxonomies: Optional[dict] = None
        self._terms: dict[str, dict[int, Optional[str]]] = {}

    # ------------------------------------------------------------------ plumbing

    def _new_session(self) -> SafeSession:
        s = SafeSession(allow_private=self.allow_private, max_bytes=MAX_RESPONSE_BYTES,
                        timeout=self.timeout, total_timeout=max(60.0, self.timeout[1] * 4))
        s.headers["Accept"] = "application/json"
        if self.auth_kind == "application_password":
            s.auth = (str(self.config.get("username") or ""),
                      str(self.config.get("app_password") or "").replace(" ", ""))
        elif self.auth_kind == "bearer":
            s.headers["Authorization"] = f"Bearer {self.config.get('bearer_token')}"
        return s

    def session(self) -> SafeSession:
        return self._sessions.get()

    def close(self) -> None:
        self._sessions.close()

    def _url(self, route: str, params: dict, mode: str) -> tuple[str, dict]:
        if mode == "query":
            return f"{self.base}/", {"rest_route": route, **params}
        return f"{self.base}/wp-json{route}", params

    def _send(self, route: str, params: dict, mode: str) -> requests.Response:
        url, p = self._url(route, params, mode)
        try:
            return self.session().get(url, params=p)
        except BlockedAddress as exc:
            raise KBError(f"{exc.message} — private network addresses are not allowed here (the operator's "
                          "KB_ALLOW_PRIVATE_NETWORK, and the organization's allow_private_network when "
                          "delegated).", code=exc.code, status=400) from None
        except ResponseTooLarge as exc:
            raise SourceUnavailable(f"WordPress at {self.base}: {exc.message}") from None
        except requests.Timeout:
            raise SourceUnavailable(f"WordPress at {self.base} did not answer within {self.timeout[1]:.0f} s "
                                    f"({route}).") from None
        except requests.ConnectionError as exc:
            raise SourceUnavailable(f"WordPress at {self.base} is not reachable: {_short(exc)}") from None
        except requests.RequestException as exc:
            raise SourceUnavailable(f"WordPress at {self.base}: request failed: {_short(exc)}") from None

    def request(self, route: str, params: Optional[dict] = None) -> requests.Response:
        """GET a REST route; 2xx and 404 are returned, other statuses raise."""
        params = dict(params or {})
        mode = self.rest_mode or "pretty"
        r = self._send(route, params, mode)
        if self.rest_mode is None:
            if r.status_code == 404 and not _is_json(r):
                # no pretty permalinks (or /wp-json blocked): the query-string form always works
                r2 = self._send(route, params, "query")
                if _is_json(r2):
                    self.rest_mode, r = "query", r2
                    self.log("WordPress REST API reached via ?rest_route= (no pretty permalinks)")
                else:
                    raise SourceUnavailable(f"{self.base} does not look like a WordPress site: no REST API at "
                                            "/wp-json/ or /?rest_route=.")
            elif _is_json(r) or r.status_code < 400:
                self.rest_mode = "pretty"
        if r.status_code in (401, 403):
            code, msg = _wp_error(r)
            raise ConnectorAuthError(f"WordPress at {self.base} refused access to {route} "
                                     f"({r.status_code} {code}): {msg}")
        if r.status_code >= 500:
            raise SourceUnavailable(f"WordPress at {self.base} answered {r.status_code} for {route}.")
        if r.status_code >= 400 and r.status_code != 404:
            code, msg = _wp_error(r)
            raise KBError(f"WordPress at {self.base} rejected {route} ({r.status_code} {code}): {msg}",
                          code="wp_bad_request", status=502)
        return r

    def get_json(self, route: str, params: Optional[dict] = None):
        r = self.request(route, params)
        if r.status_code == 404:
            code, msg = _wp_error(r)
            raise NotFoundOnSite(f"WordPress at {self.base} has no {route} ({code}): {msg}")
        return parse_json(r, self.base)

    # ------------------------------------------------------------------ API

    def check_credentials(self) -> Optional[dict]:
        """Raise ``ConnectorAuthError`` when configured credentials are not accepted."""
        if self.auth_kind == "none":
            return None
        try:
            me = self.get_json("/wp/v2/users/me", {"context": "view"})
        except ConnectorAuthError as exc:
            raise ConnectorAuthError(
                f"WordPress at {self.base} did not accept the {self.auth_kind.replace('_', ' ')} "
                f"({exc.message.split(': ', 1)[-1]}). Check the user name and application password.") from None
        return me if isinstance(me, dict) else None

    def types(self) -> dict:
        """``{slug: {"rest_base", "rest_namespace", "name", "viewable"}}`` from /wp/v2/types."""
        data = None
        if self.auth_kind != "none":
            try:
                data = self.get_json("/wp/v2/types", {"context": "edit"})
            except ConnectorAuthError:
                data = None  # e.g. a subscriber account: the view context is enough
        if data is None:
            data = self.get_json("/wp/v2/types")
        if not isinstance(data, dict):
            raise SourceUnavailable(f"WordPress at {self.base}: /wp/v2/types did not return an object.")
        out = {}
        for slug, t in data.items():
            if not isinstance(t, dict) or not t.get("rest_base"):
                continue
            out[slug] = {"slug": slug, "name": t.get("name") or slug, "rest_base": t["rest_base"],
                         "rest_namespace": t.get("rest_namespace") or "wp/v2",
                         "viewable": t.get("viewable"), "hierarchical": bool(t.get("hierarchical")),
                         "taxonomies": t.get("taxonomies") or []}
        return out

    def taxonomies(self) -> dict:
        """``{slug: {"slug", "rest_base", "rest_namespace"}}`` from /wp/v2/taxonomies (cached)."""
        if self._taxonomies is None:
            try:
                data = self.get_json("/wp/v2/taxonomies")
            except (NotFoundOnSite, ConnectorAuthError):
                data = {}
            self._taxonomies = {slug: {"slug": slug, "rest_base": t["rest_base"],
                                       "rest_namespace": t.get("rest_namespace") or "wp/v2"}
                                for slug, t in (data.items() if isinstance(data, dict) else [])
                                if isinstance(t, dict) and t.get("rest_base")}
        return self._taxonomies

    def attach_terms(self, items: list[dict], taxes: list[dict]) -> None:
        """Give list items the ``_embedded["wp:term"]`` that ``_embed=wp:term`` would (names
        of their terms), from one ``?include=`` request per taxonomy for ids not seen yet
        in this sync: embedding terms per post costs WordPress ~3x the time of the list."""
        for tax in taxes:
            field = tax["rest_base"]
            ids = {i for it in items for i in (it.get(field) or []) if isinstance(i, int)}
            with self._lock:
                cache = self._terms.setdefault(tax["slug"], {})
                missing = sorted(i for i in ids if i not in cache)
            for k in range(0, len(missing), 100):
                batch = missing[k:k + 100]
                try:
                    rows = self.get_json(f"/{tax['rest_namespace']}/{tax['rest_base']}",
                                         {"include": ",".join(map(str, batch)), "per_page": 100,
                                          "_fields": "id,name"})
                except (NotFoundOnSite, ConnectorAuthError):
                    rows = []
                found = {r["id"]: r.get("name") for r in rows if isinstance(r, dict) and "id" in r} \
                    if isinstance(rows, list) else {}
                with self._lock:
                    for i in batch:
                        cache[i] = found.get(i)
        for it in items:
            groups = []
            for tax in taxes:
                cache = self._terms.get(tax["slug"], {})
                groups.append([{"id": i, "name": cache[i], "taxonomy": tax["slug"]}
                               for i in (it.get(tax["rest_base"]) or []) if isinstance(i, int) and cache.get(i)])
            if any(groups):
                it.setdefault("_embedded", {})["wp:term"] = groups

    def collection(self, info: dict, params: dict, *, per_page: int = 100, concurrency: int = 2,
                   max_items: int = 50000) -> Iterator[dict]:
        """Every item of one post type, page by page (``X-WP-TotalPages``); pages after the
        first are fetched ``concurrency`` at a time and yielded in order."""
        route = f"/{info['rest_namespace']}/{info['rest_base']}"
        base_params = {"per_page": per_page, "status": "publish", "_embed": LIST_EMBED, "orderby": "id",
                       "order": "asc", **params}
        all_tax = self.taxonomies() if info.get("taxonomies") else {}
        taxes = [all_tax[t] for t in info.get("taxonomies") or [] if t in all_tax]

        def page(n: int):
            try:
                r = self.request(route, {**base_params, "page": n})
            except KBError as exc:
                if n > 1 and "rest_post_invalid_page_number" in exc.message:
                    return None, []  # the list shrank while we paged
                raise
            if r.status_code == 404:
                code, msg = _wp_error(r)
                raise NotFoundOnSite(f"WordPress at {self.base} has no {route} ({code}): {msg}")
            items = parse_json(r, self.base)
            if not isinstance(items, list):
                raise SourceUnavailable(f"WordPress at {self.base}: {route} did not return a list.")
            if taxes:
                self.attach_terms([i for i in items if isinstance(i, dict)], taxes)
            return r, items

        seen: set = set()
        count = 0
        for _attempt in range(3):
            totals: set = set()
            for r, items in self._pages(page, concurrency, max_items, per_page):
                totals.add(r.headers.get("X-WP-Total") if r is not None else "past the end")
                for item in items:
                    key = item.get("id") if isinstance(item, dict) else None
                    if key in seen:
                        continue
                    if count >= max_items:
                        return
                    seen.add(key)
                    count += 1
                    yield item
            if len(totals) <= 1:
                return
            # The list changed while we paged (a post published/deleted): items may have moved
            # from one page to another and been missed. Page again, yielding only new ones,
            # so that the full sync's reconciliation never purges a post it merely missed.
            self.log(f"{route}: the list changed during the sync (X-WP-Total {sorted(map(str, totals))}); "
                     "reading it again")

    @staticmethod
    def _pages(page, concurrency: int, max_items: int, per_page: int) -> Iterator[tuple]:
        """(response, items) of page 1, 2, …, X-WP-TotalPages, in order; ``concurrency``
        requests in flight after the first."""
        first = page(1)
        yield first
        try:
            total_pages = int(first[0].headers.get("X-WP-TotalPages") or 1)
        except ValueError:
            total_pages = 1
        total_pages = min(total_pages, max(1, -(-max_items // per_page)))
        if total_pages <= 1:
            return
        pages = iter(range(2, total_pages + 1))
        with ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="kbf-wp") as pool:
            window: deque = deque()
            try:
                for n in pages:
                    window.append(pool.submit(page, n))
                    if len(window) >= concurrency * 2:
                        break
                while window:
                    result = window.popleft().result()
                    nxt = next(pages, None)
                    if nxt is not None:
                        window.append(pool.submit(page, nxt))
                    yield result
            finally:
                for f in window:
                    f.cancel()

    def item(self, info: dict, post_id: str) -> tuple[int, Optional[dict]]:
        """(status, item) of one post by id: 200 with the item, 404 when the id is not of
        this type (or deleted), 401/403 when it exists but is not public."""
        route = f"/{info['rest_namespace']}/{info['rest_base']}/{post_id}"
        try:
            r = self.request(route, {"_embed": EMBED})
        except ConnectorAuthError as exc:
            if self.auth_kind == "none" or "rest_forbidden" in exc.message:
                return 401, None  # the post exists but anonymous readers may not see it
            raise
        if r.status_code == 404:
            return 404, None
        data = parse_json(r, self.base)
        return r.status_code, data if isinstance(data, dict) else None


def _is_json(r: requests.Response) -> bool:
    if "json" not in (r.headers.get("Content-Type") or "").lower():
        return False
    try:
        parse_json(r, "")
        return True
    except (SourceUnavailable, RecursionError):  # not JSON, or nested past the parser's depth
        return False


def parse_json(r: requests.Response, base: str):
    """JSON of a response, tolerating a BOM or PHP notices printed before it."""
    text = r.content.decode("utf-8", errors="replace").lstrip("\ufeff")
    try:
        return json.loads(text)
    except ValueError:
        pass
    starts = [i for i in (text.find("["), text.find("{")) if i >= 0]
    if starts:
        try:
            return json.loads(text[min(starts):])
        except ValueError:
            pass
    raise SourceUnavailable(f"WordPress at {base} did not return JSON for {r.url.split('?')[0]} "
                            f"(HTTP {r.status_code}, {r.headers.get('Content-Type') or 'no content type'}).")


def _wp_error(r: requests.Response) -> tuple[str, str]:
    try:
        data = json.loads(r.content.decode("utf-8", errors="replace").lstrip("\ufeff"))
    except ValueError:
        return "", (r.text or "")[:200].strip() or r.reason or ""
    if isinstance(data, dict):
        return str(data.get("code") or ""), str(data.get("message") or "")[:300]
    return "", ""


def _short(exc: Exception) -> str:
    s = str(exc)
    if "Connection refused" in s:
        return "connection refused"
    if "Name or service not known" in s or "cannot resolve" in s:
        return "the host name does not resolve"
    return s[:200]
