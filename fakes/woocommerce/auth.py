"""WooCommerce's authentication rules: consumer key and secret as query parameters first,
then HTTP Basic; an unknown key is "not logged in", a wrong secret is an error of its own."""
from __future__ import annotations

import base64
import hmac
from typing import Callable, Optional

from fakes.woocommerce.errors import ApiError

#: what a caller who is not logged in is told, per kind of request (``rest_*_permissions_check``)
DENIED = {
    "list": ("woocommerce_rest_cannot_view", "Sorry, you cannot list resources."),
    "view": ("woocommerce_rest_cannot_view", "Sorry, you cannot view this resource."),
    "create": ("woocommerce_rest_cannot_create", "Sorry, you are not allowed to create resources."),
    "edit": ("woocommerce_rest_cannot_edit", "Sorry, you are not allowed to edit this resource."),
    "delete": ("woocommerce_rest_cannot_delete", "Sorry, you are not allowed to delete this resource."),
}


class AuthMixin:
    """Who is asking, and what their key may do."""

    def _authenticate(self, query: dict, headers) -> Optional[bool]:
        """True: authenticated; None: no/unknown credentials; raises on a wrong secret."""
        key = secret = ""
        q_key, q_secret = query.get("consumer_key"), query.get("consumer_secret")
        if isinstance(q_key, str) and isinstance(q_secret, str) and q_key and q_secret:
            key, secret = q_key, q_secret
        else:
            auth = headers.get("Authorization") or ""
            if auth[:6].lower() == "basic ":
                try:
                    decoded = base64.b64decode(auth[6:].strip()).decode("utf-8")
                    key, _, secret = decoded.partition(":")
                except (ValueError, UnicodeDecodeError):
                    key = secret = ""
        if not key or not secret:
            return None
        if not hmac.compare_digest(key, self.consumer_key):
            return None  # WooCommerce: unknown key → not logged in (no error of its own)
        if not hmac.compare_digest(secret, self.consumer_secret):
            raise ApiError(401, "woocommerce_rest_authentication_error", "Consumer secret is invalid.",
                           headers={"WWW-Authenticate": 'Basic realm="WooCommerce API. Use a consumer key in '
                                     'the username field and a consumer secret in the password field."'})
        return True

    def _authorize(self, method: str, query: dict, headers) -> Callable[[str], None]:
        """Check the key's permissions for ``method`` now; return ``deny(kind)``, which a route
        calls once its parameters are valid (WordPress validates them first) and which
        refuses a caller who is not logged in while the store requires it."""
        authed = self._authenticate(query, headers)
        if authed:
            if method in ("GET", "HEAD") and self.permissions not in ("read", "read_write"):
                raise ApiError(401, "woocommerce_rest_authentication_error",
                               "The API key provided does not have read permissions.")
            if method in ("POST", "PUT", "PATCH", "DELETE") and self.permissions not in ("write", "read_write"):
                raise ApiError(401, "woocommerce_rest_authentication_error",
                               "The API key provided does not have write permissions.")
        allowed = bool(authed) or not self.require_auth

        def deny(kind: str = "list") -> None:
            if not allowed:
                raise ApiError(401, *DENIED.get(kind, DENIED["delete"]))

        return deny
