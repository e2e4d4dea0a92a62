"""The two public pages a customer's website loads from us:

- ``GET /widget.js?key=KEY``: the floating chat widget (one file, vanilla JS, Shadow DOM). Served
  with an ETag, a short public cache and gzip. With ``?key=`` the key is checked: unknown → 404,
  expired → 401, and a page whose ``Referer``/``Origin`` is not on the key's allowlist gets 403,
  so the widget never appears there (the API refuses such origins anyway).
- ``GET /embed/KEY[?api=v1]``: the full-page chat for an ``<iframe>``, branded from the key's
  settings and the organization's branding. ``Content-Security-Policy: frame-ancestors`` lists
  the key's allowed origins, so only those sites can frame it.
"""
from __future__ import annotations

import gzip
import hashlib
import threading
from pathlib import Path

import jinja2
from flask import Blueprint, Response, request

from kbframework.errors import KBError
from kbframework.web import embed_security as sec

bp = Blueprint("embed_pages", __name__)

WIDGET_MAX_AGE = 300  # seconds; the URL is not versioned, so keep browser caches short


def widget_dir() -> Path:
    try:
        import kbframework.widget as pkg

        return Path(pkg.__file__).resolve().parent
    except ImportError:  # a source checkout whose editable install predates widget/__init__.py
        return Path(__file__).resolve().parents[2] / "widget"


_lock = threading.Lock()
_cache: dict = {}


def widget_asset() -> dict:
    """widget.js bytes, gzip bytes and ETag; re-read when the file changes."""
    path = widget_dir() / "widget.js"
    st = path.stat()
    stamp = (st.st_mtime_ns, st.st_size)
    with _lock:
        if _cache.get("stamp") != stamp:
            raw = path.read_bytes()
            _cache.update(stamp=stamp, raw=raw, gz=gzip.compress(raw, 9, mtime=0),
                          etag=hashlib.sha256(raw).hexdigest()[:20])
        return dict(_cache)


_env: jinja2.Environment | None = None


def templates() -> jinja2.Environment:
    global _env
    if _env is None:
        _env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(widget_dir())),
                                  autoescape=jinja2.select_autoescape(["html"]), auto_reload=False)
    return _env


def _js_error(status: int, message: str) -> Response:
    body = "/* kbframework widget: " + message.replace("*/", "* /") + " */\n"
    resp = Response(body, status=status, mimetype="application/javascript")
    resp.headers["Cache-Control"] = "no-store"
    resp.headers["X-Content-Type-Options"] = "nosniff"
    return resp


@bp.get("/widget.js")
def widget_js():
    key = request.args.get("key")
    if key:
        try:
            k = sec.load_key(key)
        except KBError as exc:
            return _js_error(exc.status, exc.message)
        origin = sec.request_origin()
        # A page that tells us where it is must be on the allowlist; one that sends no Referer
        # (Referrer-Policy: no-referrer) still gets the file, and the API checks Origin.
        sent = request.headers.get("Origin") is not None or request.headers.get("Referer") is not None
        if not k.origins or (sent and not sec.origin_allowed(k, origin)):
            return _js_error(403, "this website is not allowed to use this assistant key")
    a = widget_asset()
    etag = f'"{a["etag"]}"'
    headers = {"ETag": etag, "Cache-Control": f"public, max-age={WIDGET_MAX_AGE}",
               "Vary": "Accept-Encoding", "X-Content-Type-Options": "nosniff",
               "Cross-Origin-Resource-Policy": "cross-origin"}
    if etag in [t.strip() for t in request.headers.get("If-None-Match", "").split(",")]:
        return Response(status=304, headers=headers)
    if "gzip" in request.headers.get("Accept-Encoding", ""):
        resp = Response(a["gz"], mimetype="application/javascript", headers=headers)
        resp.headers["Content-Encoding"] = "gzip"
    else:
        resp = Response(a["raw"], mimetype="application/javascript", headers=headers)
    resp.headers["Content-Type"] = "application/javascript; charset=utf-8"
    return resp


PAGE_CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
            "img-src 'self' https: data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
            "frame-ancestors {ancestors}")

ERROR_PAGE = jinja2.Template(
    "<!doctype html><html lang=en><meta charset=utf-8><meta name=viewport content='width=device-width'>"
    "<meta name=robots content=noindex><title>Chat unavailable</title>"
    "<body style='font:16px system-ui,sans-serif;color:#333;margin:2rem'><p>{{ message }}</p></body></html>",
    autoescape=True)


def _page_error(status: int, message: str) -> Response:
    resp = Response(ERROR_PAGE.render(message=message), status=status, mimetype="text/html")
    resp.headers["Content-Security-Policy"] = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors *"
    resp.headers["Cache-Control"] = "no-store"
    return resp


@bp.get("/embed/<key>")
def embed_page(key):
    try:
        k = sec.load_key(key)
    except KBError as exc:
        msg = ("This chat is not available: the link is out of date." if exc.status == 401
               else "This chat does not exist.")
        return _page_error(exc.status, msg)
    if not k.origins:
        return _page_error(403, "This chat is not enabled for any website yet.")
    api = request.args.get("api") or sec.API_VERSIONS[-1]
    if api not in sec.API_VERSIONS:
        return _page_error(404, "Unknown API version.")
    html = templates().get_template("embed.html").render(
        key=k.key, base="", api_version=api, config=sec.public_config(k),
        widget_url=f"/widget.js?key={k.key}")
    resp = Response(html, mimetype="text/html")
    resp.headers["Content-Security-Policy"] = PAGE_CSP.format(ancestors=" ".join(k.origins))
    resp.headers["Cache-Control"] = "no-cache"
    resp.headers["X-Content-Type-Options"] = "nosniff"
    resp.headers["Referrer-Policy"] = "strict-origin-when-cross-origin"
    return resp
