"""WooCommerce webhook helpers: signature check and delivery classification.

How WooCommerce sends (``includes/class-wc-webhook.php``):

* body = ``trim(wp_json_encode($payload))``: compact JSON with ``\\/`` and ``\\uXXXX``
  escapes. Verify the signature over the **raw bytes received**, never over re-encoded
  JSON.
* ``X-WC-Webhook-Signature`` = base64(HMAC-SHA256(secret, raw body)).
* Other headers: ``X-WC-Webhook-Source`` (site URL), ``-Topic`` (``product.updated``),
  ``-Resource``, ``-Event``, ``-ID`` (webhook id), ``-Delivery-ID``.
* ``*.deleted`` topics (fired when a product is *trashed*) carry only ``{"id": N}``.
* ``product.created``/``product.updated`` also fire for **variations**; the payload is
  then the variation rendered by ``/products/<variation id>`` (``type: "variation"``,
  ``parent_id`` set), and a trashed variation sends ``product.deleted`` with its own id.
* The ping, sent when a webhook is created/activated, is a plain form body
  ``webhook_id=N`` with no ``X-WC-Webhook-*`` headers and no signature; it must get a
  200 or WooCommerce reports "Delivery URL returned response code".
* ``X-WC-Webhook-Delivery-ID`` is ``wp_hash(webhook_id . time())``: two deliveries of
  the same webhook within one second share it. De-duplicate on (delivery id, topic,
  resource id, body hash), not on the delivery id alone, and only after the signature
  checked out.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from typing import Any, Iterable, Mapping, Optional, Union

from kbframework_woocommerce.normalize import parse_gmt

HeadersLike = Union[Mapping[str, Any], Iterable[tuple[str, Any]]]

_PING_RE = re.compile(rb"^\s*webhook_id=(\d+)\s*$")


def compute_signature(raw_body: Union[bytes, str], secret: str) -> str:
    """base64(HMAC-SHA256(secret, raw_body)), as WooCommerce computes it."""
    if isinstance(raw_body, str):
        raw_body = raw_body.encode("utf-8")
    digest = hmac.new(secret.encode("utf-8"), raw_body, hashlib.sha256).digest()
    return base64.b64encode(digest).decode("ascii")


def verify_signature(raw_body: Union[bytes, str], header_value: Optional[str], secret: Optional[str]) -> bool:
    """True when ``header_value`` (``X-WC-Webhook-Signature``) is the signature of the raw
    body under ``secret``. Constant-time; False for a missing header or secret."""
    if not header_value or not secret or raw_body is None:
        return False
    expected = compute_signature(raw_body, secret)
    return hmac.compare_digest(expected.encode("ascii"), header_value.strip().encode("ascii", "replace"))


def _header_getter(headers: Optional[HeadersLike]):
    if headers is None:
        return lambda name: None
    get = getattr(headers, "get", None)
    if callable(get) and hasattr(headers, "keys"):
        lowered = {str(k).lower(): v for k, v in headers.items()}
    else:
        lowered = {str(k).lower(): v for k, v in headers}

    def getter(name: str) -> Optional[str]:
        value = lowered.get(name.lower())
        if isinstance(value, (list, tuple)):
            value = value[0] if value else None
        return str(value).strip() if value is not None else None

    return getter


def _int(value: Any) -> Optional[int]:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def classify_delivery(headers: Optional[HeadersLike], raw_body: Union[bytes, str, None]) -> dict:
    """Describe a request received on the webhook endpoint (no signature check here).

    Returns a dict with:

    * ``kind``: ``"ping"`` (WooCommerce's ``webhook_id=N`` form body without a topic
      header), ``"product"`` (a ``product.*`` topic) or ``"other"`` (another resource, or
      nothing recognisable).
    * ``topic``, ``resource``, ``event``, ``delivery_id``, ``webhook_id``, ``source``.
    * ``product_id``: the payload's ``id`` (for a variation: the variation's id).
    * ``parent_id``: set when the payload is a variation (re-sync that product);
      ``is_variation``.
    * ``status``: the payload's ``status`` (``publish``, ``draft``, ``trash``...) or None.
    * ``date_modified_gmt``: aware UTC datetime from the payload, or None (``*.deleted``).
    * ``body_sha256``: hex digest of the raw body, for de-duplication.
    * ``error``: ``"invalid_json"`` when a product body is not JSON, else None.
    """
    if isinstance(raw_body, str):
        raw_body = raw_body.encode("utf-8")
    raw_body = raw_body or b""
    get = _header_getter(headers)
    topic = (get("X-WC-Webhook-Topic") or "").lower() or None
    resource = (get("X-WC-Webhook-Resource") or "").lower() or None
    event = (get("X-WC-Webhook-Event") or "").lower() or None
    if topic and "." in topic:
        resource = resource or topic.split(".", 1)[0]
        event = event or topic.split(".", 1)[1]
    result: dict[str, Any] = {
        "kind": "other", "topic": topic, "resource": resource, "event": event,
        "delivery_id": get("X-WC-Webhook-Delivery-ID") or None,
        "webhook_id": _int(get("X-WC-Webhook-ID")),
        "source": get("X-WC-Webhook-Source") or None,
        "product_id": None, "parent_id": None, "is_variation": False, "status": None,
        "date_modified_gmt": None,
        "body_sha256": hashlib.sha256(raw_body).hexdigest(),
        "error": None,
    }
    if not topic:
        match = _PING_RE.match(raw_body)
        if match:
            result.update(kind="ping", webhook_id=int(match.group(1)))
        return result
    if resource != "product":
        return result
    result["kind"] = "product"
    try:
        payload = json.loads(raw_body.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        result["error"] = "invalid_json"
        return result
    if not isinstance(payload, dict):
        result["error"] = "invalid_json"
        return result
    result["product_id"] = _int(payload.get("id"))
    parent_id = _int(payload.get("parent_id"))
    is_variation = payload.get("type") == "variation"
    result["is_variation"] = bool(is_variation)
    result["parent_id"] = parent_id if (parent_id and is_variation) else None
    result["status"] = payload.get("status") if isinstance(payload.get("status"), str) else None
    result["date_modified_gmt"] = parse_gmt(payload.get("date_modified_gmt"))
    return result
