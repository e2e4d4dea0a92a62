"""Webhooks, both sides: the ``/webhooks`` API (topics, hooks, the ping on create) and the
deliveries WooCommerce POSTs (body, signature, headers, disabling after failures)."""
from __future__ import annotations

import base64
import copy
import hashlib
import hmac
import http.client
import re
import secrets
import threading
import time
from typing import Any, Optional
from urllib.parse import urlsplit

from fakes.woocommerce.errors import ApiError
from fakes.woocommerce.wordpress import php_json_encode

_WEBHOOK_TOPIC_HOOKS = {
    "coupon.created": ["woocommerce_process_shop_coupon_meta", "woocommerce_new_coupon"],
    "coupon.updated": ["woocommerce_process_shop_coupon_meta", "woocommerce_update_coupon"],
    "coupon.deleted": ["wp_trash_post"],
    "coupon.restored": ["untrashed_post"],
    "customer.created": ["user_register", "woocommerce_created_customer", "woocommerce_new_customer"],
    "customer.updated": ["profile_update", "woocommerce_update_customer"],
    "customer.deleted": ["delete_user"],
    "order.created": ["woocommerce_new_order"],
    "order.updated": ["woocommerce_update_order", "woocommerce_order_refunded",
                      "woocommerce_delete_order_refund"],
    "order.deleted": ["wp_trash_post", "woocommerce_trash_order"],
    "order.restored": ["untrashed_post", "woocommerce_untrash_order"],
    "product.created": ["woocommerce_process_product_meta", "woocommerce_new_product",
                        "woocommerce_new_product_variation"],
    "product.updated": ["woocommerce_process_product_meta", "woocommerce_update_product",
                        "woocommerce_update_product_variation"],
    "product.deleted": ["wp_trash_post"],
    "product.restored": ["untrashed_post"],
    "product.published": ["woocommerce_product_published"],
}


class WebhooksMixin:
    """Registered webhooks and their deliveries."""

    @property
    def webhooks(self) -> list[dict]:
        """Registered webhooks as the API shows them, plus ``secret`` and ``failure_count``."""
        with self._lock:
            out = []
            for wid, wh in sorted(self._webhooks.items()):
                item = copy.deepcopy(wh)
                item["failure_count"] = self._webhook_failures.get(wid, 0)
                out.append(item)
            return out

    def _webhook_json(self, wh: dict) -> dict:
        keys = ("id", "name", "status", "topic", "resource", "event", "hooks", "delivery_url",
                "date_created", "date_created_gmt", "date_modified", "date_modified_gmt")
        data = {k: copy.deepcopy(wh[k]) for k in keys}
        data["_links"] = {"self": [{"href": f"{self.links_url}/webhooks/{wh['id']}"}],
                          "collection": [{"href": f"{self.links_url}/webhooks"}]}
        return data

    @staticmethod
    def _valid_topic(topic: str) -> bool:
        if topic.startswith("action.") and len(topic) > 7:
            return True
        return topic in _WEBHOOK_TOPIC_HOOKS

    def _create_webhook(self, params: dict, deny) -> tuple[int, Any, dict]:
        missing = [k for k in ("topic", "delivery_url") if not params.get(k)]
        if missing:
            raise ApiError(400, "rest_missing_callback_param",
                           "Missing parameter(s): " + ", ".join(missing), {"params": missing})
        deny("create")
        topic = str(params["topic"]).strip().lower()
        if not self._valid_topic(topic):
            raise ApiError(400, "woocommerce_rest_shop_webhook_invalid_topic",
                           "Webhook topic is required and must be valid.")
        url = str(params["delivery_url"]).strip()
        if not re.match(r"^https?://", url):
            raise ApiError(400, "woocommerce_rest_shop_webhook_invalid_delivery_url",
                           "Webhook delivery URL must be a valid URL starting with http:// or https://.")
        with self._lock:
            wid = self._next_webhook_id
            self._next_webhook_id += 1
            local, gmt = self._dates(self.now())
            resource, _, event = topic.partition(".")
            wh = {
                "id": wid,
                "name": params.get("name") or "Webhook created on "
                        + (self.now() + self.utc_offset).strftime("%b %d, %Y @ %I:%M %p"),
                "status": params.get("status") or "active", "topic": topic,
                "resource": resource, "event": event,
                "hooks": [event] if resource == "action" else list(_WEBHOOK_TOPIC_HOOKS.get(topic, [])),
                "delivery_url": url, "date_created": local, "date_created_gmt": gmt,
                "date_modified": local, "date_modified_gmt": gmt,
                "secret": params.get("secret") or secrets.token_urlsafe(38)[:50],
                "api_version": params.get("api_version") or "wp_api_v3",
            }
            self._webhooks[wid] = wh
            data = self._webhook_json(wh)
        if self.ping_on_create:
            result = self.ping(url, webhook_id=wid, timeout=5)
            with self._lock:
                self.pings.append({"webhook_id": wid, "url": url, "result": result})
        return 201, data, {"Location": f"{self.links_url}/webhooks/{wid}"}

    def _update_webhook(self, wid: int, params: dict) -> tuple[int, Any, dict]:
        with self._lock:
            wh = self._webhooks.get(wid)
            if wh is None:
                raise ApiError(400, "woocommerce_rest_shop_webhook_invalid_id", "ID is invalid.")
            if "topic" in params:
                topic = str(params["topic"]).strip().lower()
                if not self._valid_topic(topic):
                    raise ApiError(400, "woocommerce_rest_shop_webhook_invalid_topic",
                                   "Webhook topic must be valid.")
                resource, _, event = topic.partition(".")
                wh.update(topic=topic, resource=resource, event=event,
                          hooks=[event] if resource == "action" else list(_WEBHOOK_TOPIC_HOOKS.get(topic, [])))
            for key in ("name", "status", "delivery_url", "secret"):
                if params.get(key):
                    wh[key] = params[key]
            if params.get("status") == "active":
                self._webhook_failures[wid] = 0
            wh["date_modified"], wh["date_modified_gmt"] = self._dates(self.now())
            return 200, self._webhook_json(wh), {}

    def webhook_body(self, topic: str, resource_id: int) -> bytes:
        """The exact bytes WooCommerce would POST for ``topic`` about ``resource_id``."""
        event = topic.partition(".")[2]
        if event == "deleted":
            payload: Any = {"id": int(resource_id)}
        else:
            with self._lock:
                rid = int(resource_id)
                if rid in self._products:
                    payload = copy.deepcopy(self._products[rid])
                elif rid in self._variation_parent:
                    payload = self._variation_as_product(self._variations[self._variation_parent[rid]][rid])
                else:
                    payload = {"code": "woocommerce_rest_product_invalid_id", "message": "Invalid ID.",
                               "data": {"status": 404}}
        return php_json_encode(payload).strip().encode("ascii")

    @staticmethod
    def sign(body: bytes, secret: str) -> str:
        return base64.b64encode(hmac.new(secret.encode("utf-8"), body, hashlib.sha256).digest()).decode("ascii")

    def _user_agent(self) -> str:
        return f"WooCommerce/{self.wc_version} Hookshot (WordPress/{self.wp_version})"

    def _find_webhook(self, target_url: str, topic: Optional[str]) -> Optional[dict]:
        with self._lock:
            for wh in self._webhooks.values():
                if wh["delivery_url"] == target_url and (topic is None or wh["topic"] == topic):
                    return wh
        return None

    def deliver(self, target_url: str, topic: str, product_id: int, secret: Optional[str] = None,
                delivery_id: Optional[str] = None, *, webhook_id: Optional[int] = None,
                body: Optional[bytes] = None, timeout: float = 60) -> tuple[int, bytes]:
        """POST a webhook to ``target_url`` exactly as WooCommerce does. ``secret=None``
        uses the secret of a registered webhook for that URL/topic. ``body`` overrides
        the payload (e.g. to tamper with it after signing, sign first with ``sign``).
        Returns ``(status, response body)``; status 0 when the URL cannot be reached."""
        wh = self._find_webhook(target_url, topic)
        if webhook_id is None:
            webhook_id = wh["id"] if wh else 142
        if secret is None:
            if wh is None:
                raise ValueError("no secret given and no webhook registered for that URL/topic")
            secret = wh["secret"]
        raw = self.webhook_body(topic, product_id)
        signature = self.sign(raw, secret)
        if body is not None:
            raw = body
        if delivery_id is None:
            # wp_hash( $webhook_id . strtotime('now') ): same id for two deliveries in one second
            delivery_id = hmac.new(b"fake-wp-salt", f"{webhook_id}{int(time.time())}".encode(),
                                   hashlib.md5).hexdigest()
        resource, _, event = topic.partition(".")
        headers = {
            "User-Agent": self._user_agent(),
            "Content-Type": "application/json",
            "X-WC-Webhook-Source": self.site_url + "/",
            "X-WC-Webhook-Topic": topic,
            "X-WC-Webhook-Resource": resource,
            "X-WC-Webhook-Event": event,
            "X-WC-Webhook-Signature": signature,
            "X-WC-Webhook-ID": str(webhook_id),
            "X-WC-Webhook-Delivery-ID": delivery_id,
        }
        status, response = self._post(target_url, raw, headers, timeout)
        with self._lock:
            self.deliveries.append({"webhook_id": webhook_id, "topic": topic, "resource_id": int(product_id),
                                    "delivery_id": delivery_id, "status": status, "url": target_url})
            if webhook_id in self._webhooks:
                if 200 <= status < 303:
                    self._webhook_failures[webhook_id] = 0
                else:  # WC_Webhook::failed_delivery: disabled after more than 5 failures in a row
                    failures = self._webhook_failures.get(webhook_id, 0)
                    if failures > 5:
                        self._webhooks[webhook_id]["status"] = "disabled"
                    else:
                        self._webhook_failures[webhook_id] = failures + 1
        return status, response

    def ping(self, target_url: str, webhook_id: Optional[int] = None, timeout: float = 5) -> tuple[int, bytes]:
        """WC_Webhook::deliver_ping(): form body ``webhook_id=N``, no X-WC headers."""
        if webhook_id is None:
            wh = self._find_webhook(target_url, None)
            webhook_id = wh["id"] if wh else 142
        headers = {"User-Agent": self._user_agent(),
                   "Content-Type": "application/x-www-form-urlencoded"}
        return self._post(target_url, f"webhook_id={webhook_id}".encode(), headers, timeout)

    def dispatch_webhooks(self, topic: str, resource_id: int) -> list[tuple[int, int]]:
        """Deliver ``topic`` to every active registered webhook for it, like WC would."""
        results = []
        for wh in self.webhooks:
            if wh["status"] == "active" and wh["topic"] == topic:
                status, _ = self.deliver(wh["delivery_url"], topic, resource_id, wh["secret"],
                                         webhook_id=wh["id"])
                results.append((wh["id"], status))
        return results

    def _auto(self, topic: str, resource_id: int) -> None:
        if self.auto_deliver:
            threading.Thread(target=self.dispatch_webhooks, args=(topic, resource_id), daemon=True).start()

    @staticmethod
    def _post(url: str, body: bytes, headers: dict, timeout: float) -> tuple[int, bytes]:
        parts = urlsplit(url)
        conn_cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        try:
            conn = conn_cls(parts.hostname, parts.port, timeout=timeout)
            conn._http_vsn, conn._http_vsn_str = 10, "HTTP/1.0"  # WC posts with httpversion 1.0
            try:
                conn.putrequest("POST", target, skip_accept_encoding=True)
                for key, value in {**headers, "Content-Length": str(len(body)),
                                   "Connection": "close"}.items():
                    conn.putheader(key, value)
                conn.endheaders(body)
                response = conn.getresponse()  # redirection = 0: never follow
                return response.status, response.read()
            finally:
                conn.close()
        except (OSError, http.client.HTTPException):
            return 0, b""
