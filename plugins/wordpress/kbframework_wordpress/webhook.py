"""Webhooks from WordPress: "post N changed", as the common webhook plugins send it.

Accepted bodies (JSON or ``application/x-www-form-urlencoded``, nested keys as PHP's
``http_build_query`` writes them: ``post[ID]=4&post[post_type]=post``):

* WP Webhooks (``post_create`` / ``post_update`` / ``post_delete`` / ``post_trash``):
  ``{"post_id": 4, "post": {"ID": 4, "post_type": "post", "post_status": "publish",
  "post_modified_gmt": "…"}, "post_meta": {…}, …}``
* flat ones: ``{"post_id": 4, "post_type": "event"}``, ``{"id": 4, "type": "post"}``,
  ``{"ID": 4}``; an ``action``/``event``/``trigger`` key is kept as a hint only.

Authentication, with the source's ``webhook_secret`` (constant-time comparisons):

* the secret itself in a header: ``X-KB-Webhook-Secret`` (also ``X-Webhook-Secret``,
  ``Authorization: Bearer <secret>``), or ``?secret=<secret>`` in the URL (works with
  senders that cannot set headers; URLs end up in logs, so prefer a header), or
* an HMAC-SHA256 of the raw body: ``X-WP-Webhook-Signature`` (WP Webhooks: base64),
  ``X-KB-Signature`` / ``X-Webhook-Signature`` / ``X-Hub-Signature-256`` (hex or base64,
  optional ``sha256=`` prefix).

Whatever the body says, the item is always re-fetched from the REST API (event
``updated``): the site, not the webhook, decides whether the post is published, changed,
trashed or deleted, and the freshness rule ignores stale deliveries. A delivery id
(``X-KB-Delivery-ID`` / ``X-Delivery-ID`` / ``X-Request-ID`` / ``Idempotency-Key``, else
derived from the post's id + modification time + status + body hash when the body carries
a modification time) lets the host ignore repeated deliveries.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from typing import Any, Optional
from urllib.parse import parse_qsl

SECRET_HEADERS = ("x-kb-webhook-secret", "x-webhook-secret", "x-wp-webhook-secret")
SIGNATURE_HEADERS = ("x-kbf-signature", "x-wp-webhook-signature", "x-kb-signature", "x-webhook-signature", "x-hub-signature-256",
                     "x-signature")
DELIVERY_HEADERS = ("x-kb-delivery-id", "x-delivery-id", "x-wp-webhook-delivery-id", "x-request-id",
                    "idempotency-key")


def _lower(headers) -> dict:
    items = headers.items() if hasattr(headers, "items") else headers or []
    return {str(k).lower(): str(v).strip() for k, v in items}


def _eq(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode("utf-8", "replace"), b.encode("utf-8", "replace"))


def signature_ok(raw: bytes, sent: str, secret: str) -> bool:
    sent = sent.strip()
    if sent.lower().startswith("sha256="):
        sent = sent[7:]
    digest = hmac.new(secret.encode("utf-8"), raw, hashlib.sha256).digest()
    ok_hex = _eq(sent.lower(), digest.hex())
    ok_b64 = _eq(sent, base64.b64encode(digest).decode("ascii"))
    return ok_hex or ok_b64


def _query_secret() -> Optional[str]:
    """``?secret=`` of the current Flask request, if there is one."""
    try:
        from flask import has_request_context, request
    except ImportError:  # pragma: no cover
        return None
    if has_request_context():
        return request.args.get("secret")
    return None


def authenticate(headers: dict, raw: bytes, secret: Optional[str], query_secret: Optional[str] = None) \
        -> tuple[bool, str]:
    if not secret:
        return False, "This source has no webhook secret configured."
    h = _lower(headers)
    for name in SECRET_HEADERS:
        if h.get(name):
            return (True, "") if _eq(h[name], secret) else (False, f"The {name} header does not match.")
    auth = h.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return (True, "") if _eq(auth[7:].strip(), secret) else (False, "The bearer secret does not match.")
    for name in SIGNATURE_HEADERS:
        if h.get(name):
            return (True, "") if signature_ok(raw, h[name], secret) else \
                (False, f"The {name} signature does not match the body.")
    if query_secret:
        return (True, "") if _eq(query_secret, secret) else (False, "The secret in the URL does not match.")
    return False, ("No webhook secret: send it in the X-KB-Webhook-Secret header (or sign the body with "
                   "HMAC-SHA256 in X-WP-Webhook-Signature).")


_BRACKETS = re.compile(r"\[([^\]]*)\]")


def parse_form(raw: bytes) -> dict:
    """``a=1&post[ID]=4&post[post_type]=post`` → ``{"a": "1", "post": {"ID": "4", …}}``."""
    out: dict = {}
    for key, value in parse_qsl(raw.decode("utf-8", errors="replace"), keep_blank_values=True):
        head = key.split("[", 1)[0]
        parts = [head] + _BRACKETS.findall(key[len(head):])
        cur = out
        for p in parts[:-1]:
            nxt = cur.get(p)
            if not isinstance(nxt, dict):
                nxt = cur[p] = {}
            cur = nxt
        cur[parts[-1]] = value
    return out


def parse_body(headers: dict, raw: bytes) -> Optional[dict]:
    text = raw.strip()
    if not text:
        return {}
    ctype = _lower(headers).get("content-type", "")
    if text[:1] in (b"{", b"[") or "json" in ctype:
        try:
            data = json.loads(text.decode("utf-8", errors="replace"))
        except ValueError:
            return None
        if isinstance(data, list) and data and isinstance(data[0], dict):
            data = data[0]
        return data if isinstance(data, dict) else None
    if b"=" in text:
        return parse_form(text)
    return None


def _int_id(v: Any) -> Optional[int]:
    if isinstance(v, bool):
        return None
    if isinstance(v, int) and v > 0:
        return v
    if isinstance(v, str) and v.strip().isdigit() and int(v.strip()) > 0:
        return int(v.strip())
    return None


def describe(body: dict) -> dict:
    """Post id, type, status, modification time and event hint of a webhook body."""
    post = body.get("post") if isinstance(body.get("post"), dict) else {}
    data = body.get("data") if isinstance(body.get("data"), dict) else {}
    pid = None
    for cand in (body.get("post_id"), post.get("ID"), post.get("id"), body.get("ID"), body.get("id"),
                 data.get("post_id"), data.get("ID"), data.get("id")):
        pid = _int_id(cand)
        if pid:
            break
    ptype = None
    for cand in (body.get("post_type"), post.get("post_type"), post.get("type"), data.get("post_type"),
                 body.get("type")):
        if isinstance(cand, str) and re.match(r"^[a-z0-9_-]{1,40}$", cand):
            ptype = cand
            break
    status = next((c for c in (post.get("post_status"), body.get("post_status"), body.get("status"),
                               data.get("post_status")) if isinstance(c, str)), None)
    modified = next((c for c in (post.get("post_modified_gmt"), body.get("post_modified_gmt"),
                                 body.get("modified_gmt"), data.get("post_modified_gmt"),
                                 post.get("post_modified"), body.get("modified")) if isinstance(c, str) and c),
                    None)
    hint = next((c for c in (body.get("action"), body.get("event"), body.get("trigger"), body.get("hook"))
                 if isinstance(c, str) and c), None)
    return {"post_id": pid, "post_type": ptype, "status": status, "modified": modified, "hint": hint}


NOTICE_EVENTS = ("publish", "update", "unpublish", "trash", "untrash", "delete", "product_save", "stock",
                 "ping")


def companion_notice(headers: dict, raw: bytes, body: dict, secret: str) -> dict:
    """A notice of the kbframework Connect plugin: ``{"kbf_notice": 1, "post_id", "post_type",
    "event", "modified_gmt", "ts", "nonce"}``, signed (``X-KBF-Signature``) over the raw
    body. The signature alone is not enough: the timestamp must be fresh and the nonce new,
    so a captured notice cannot be sent again. The post is re-read from the REST API; the
    notice's modification time only lets an older notice be skipped as stale."""
    from kbframework_wordpress import companion as cp

    if not _lower(headers).get("x-kbf-signature"):
        return {"ok": False, "reason": "A kbframework Connect notice must be signed (X-KBF-Signature)."}
    scope = hashlib.sha256(secret.encode("utf-8")).hexdigest()[:24]
    why = cp.check_fresh(body, scope)
    if why:
        return {"ok": False, "reason": why, "topic": "notice.refused"}
    event = str(body.get("event") or "update")[:20]
    if event not in NOTICE_EVENTS:
        event = "update"
    ptype = body.get("post_type") if isinstance(body.get("post_type"), str) \
        and re.match(r"^[a-z0-9_-]{1,40}$", body["post_type"]) else "post"
    topic = f"{ptype}.{event}"
    pid = _int_id(body.get("post_id"))
    if ptype == "product_variation" and _int_id(body.get("parent_id")):
        pid, ptype = _int_id(body.get("parent_id")), "product"  # a variation's stock is its product's
        topic = f"product.{event}"
    if event == "ping" or not pid:
        return {"ok": True, "kind": "ping", "topic": topic}
    modified = None
    if event in ("publish", "update", "product_save", "stock"):
        # lets a late retry of an older version be skipped; a status change always re-reads
        from kbframework_wordpress.mapping import parse_gmt

        modified = parse_gmt(body.get("modified_gmt")) if isinstance(body.get("modified_gmt"), str) else None
    return {"ok": True, "kind": "item", "external_id": str(pid), "event": "updated", "topic": topic,
            "delivery_id": f"kbfc-{body['nonce']}"[:200], "source_modified_at": modified,
            "payload": {"post_type": ptype, "hint": event}}


def handle(headers, raw_body: bytes, secrets: dict) -> dict:
    raw = raw_body or b""
    ok, reason = authenticate(headers, raw, (secrets or {}).get("webhook_secret"), _query_secret())
    if not ok:
        return {"ok": False, "reason": reason}
    body = parse_body(headers, raw)
    if body is None:
        return {"ok": False, "reason": "The webhook body is neither JSON nor a form."}
    if body.get("kbf_notice"):
        return companion_notice(headers, raw, body, secrets["webhook_secret"])
    info = describe(body)
    h = _lower(headers)
    hint = (info["hint"] or h.get("x-wp-webhook-name") or "changed").lower()[:40]
    topic = f"{info['post_type'] or 'post'}.{hint}"[:100]
    if not info["post_id"]:
        # a test delivery ("Send demo") or a trigger without a post: acknowledge it
        return {"ok": True, "kind": "ping", "topic": topic}
    delivery = next((h[n] for n in DELIVERY_HEADERS if h.get(n)), None)
    if delivery is None and info["modified"]:
        stamp = f"{info['post_id']}|{info['modified']}|{info['status']}|{hashlib.sha256(raw).hexdigest()}"
        delivery = "wp-" + hashlib.sha256(stamp.encode()).hexdigest()[:40]
    return {"ok": True, "kind": "item", "external_id": str(info["post_id"]), "event": "updated",
            "topic": topic, "delivery_id": delivery[:200] if delivery else None,
            "payload": {"post_type": info["post_type"], "hint": info["hint"]}}
