"""The REST routes the store answers: products, categories, variations and webhooks, with
``_fields`` and the request body as WordPress reads them."""
from __future__ import annotations

import copy
import json
import re
from typing import Any
from urllib.parse import parse_qsl

from fakes.woocommerce.errors import NO_ROUTE, ApiError
from fakes.woocommerce.wordpress import WC_NAMESPACE, number


class RoutesMixin:
    """One method per request: the route, then what it returns."""

    def _route(self, method: str, path: str, query: dict, body: bytes, headers) -> tuple[int, Any, dict]:
        deny = self._authorize(method, query, headers)
        route = path[len(WC_NAMESPACE):] if path.startswith(WC_NAMESPACE) else None
        if route is None:
            raise ApiError(404, **{k: NO_ROUTE[k] for k in ("code", "message")})
        route = route.rstrip("/") or "/"
        get = method in ("GET", "HEAD")

        m = None
        if route == "/products" and get:
            params = self._collection_params(query, products=True)
            deny("list")
            return self._list_products(params, query)
        if route == "/products/categories" and get:
            params = self._collection_params(query, products=False)
            deny("list")
            with self._lock:
                items = [self._category_json(c) for c in sorted(self._categories.values(), key=lambda c: c["name"])]
            return self._page(items, params, query, "/products/categories", links=False)
        if (m := re.fullmatch(r"/products/(\d+)", route)) and get:
            deny("view")
            pid = int(m.group(1))
            with self._lock:
                if pid in self._products:
                    data = self._fields(copy.deepcopy(self._products[pid]), query)
                elif pid in self._variation_parent:
                    v = self._variations[self._variation_parent[pid]][pid]
                    data = self._fields(self._variation_as_product(v), query)
                else:
                    raise ApiError(404, "woocommerce_rest_product_invalid_id", "Invalid ID.")
            return 200, data, {"Allow": "GET, POST, PUT, PATCH, DELETE"}
        if (m := re.fullmatch(r"/products/(\d+)/variations", route)) and get:
            params = self._collection_params(query, products=False)
            deny("list")
            pid = int(m.group(1))
            with self._lock:
                items = list(self._variations.get(pid, {}).values())
                items = self._filter_dates(items, params)
                if params.get("include"):
                    items = [v for v in items if v["id"] in params["include"]]
                items.sort(key=lambda v: (v["date_created_gmt"], v["id"]), reverse=params["order"] == "desc")
                items = [copy.deepcopy(v) for v in items]
            return self._page(items, params, query, f"/products/{pid}/variations")
        if (m := re.fullmatch(r"/products/(\d+)/variations/(\d+)", route)) and get:
            deny("view")
            pid, vid = int(m.group(1)), int(m.group(2))
            with self._lock:
                v = self._variations.get(pid, {}).get(vid)
                if v is None:
                    raise ApiError(404, "woocommerce_rest_product_variation_invalid_id", "Invalid ID.")
                data = self._fields(copy.deepcopy(v), query)
            return 200, data, {}
        if route == "/webhooks":
            if get:
                params = self._collection_params(query, products=False)
                deny("list")
                wanted = query.get("status", "all")
                with self._lock:
                    items = [self._webhook_json(w) for _, w in sorted(self._webhooks.items(), reverse=True)
                             if wanted in ("all", w["status"])]
                return self._page(items, params, query, "/webhooks")
            if method == "POST":
                return self._create_webhook(self._body_params(body, headers), deny)
        if m := re.fullmatch(r"/webhooks/(\d+)", route):
            wid = int(m.group(1))
            if get:
                deny("view")
                with self._lock:
                    wh = self._webhooks.get(wid)
                    if wh is None:
                        raise ApiError(404, "woocommerce_rest_shop_webhook_invalid_id", "Invalid ID.")
                    return 200, self._webhook_json(wh), {}
            if method in ("PUT", "PATCH", "POST"):
                deny("edit")
                return self._update_webhook(wid, self._body_params(body, headers))
            if method == "DELETE":
                deny("delete")
                force = str(query.get("force", "")).lower() in ("1", "true")
                with self._lock:
                    wh = self._webhooks.get(wid)
                    if wh is None:
                        raise ApiError(404, "woocommerce_rest_shop_webhook_invalid_id", "Invalid ID.")
                    if not force:
                        raise ApiError(501, "woocommerce_rest_trash_not_supported",
                                       "Webhooks do not support trashing.")
                    del self._webhooks[wid]
                    return 200, self._webhook_json(wh), {}
        raise ApiError(404, **{k: NO_ROUTE[k] for k in ("code", "message")})

    @staticmethod
    def _body_params(body: bytes, headers) -> dict:
        if not body:
            return {}
        ctype = (headers.get("Content-Type") or "").lower()
        if "json" in ctype or body.lstrip()[:1] in (b"{", b"["):
            try:
                data = json.loads(body.decode("utf-8"))
            except (ValueError, UnicodeDecodeError):
                raise ApiError(400, "rest_invalid_json", "Invalid JSON body passed.",
                               {"json_error_code": 4, "json_error_message": "Syntax error"})
            return data if isinstance(data, dict) else {}
        return dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))

    def _list_products(self, params: dict, query: dict) -> tuple[int, Any, dict]:
        with self._lock:
            items = list(self._products.values())
            status = params["status"]
            if status == "any":
                items = [p for p in items if p["status"] not in ("trash", "auto-draft")]
            else:
                items = [p for p in items if p["status"] == status]
            if params["include"]:
                wanted = set(params["include"])
                items = [p for p in items if p["id"] in wanted]
            if params["exclude"]:
                unwanted = set(params["exclude"])
                items = [p for p in items if p["id"] not in unwanted]
            if params.get("type"):
                items = [p for p in items if p["type"] == params["type"]]
            if params.get("stock_status"):
                items = [p for p in items if p["stock_status"] == params["stock_status"]]
            if "sku" in params:
                skus = {s.strip() for s in params["sku"].split(",")}
                items = [p for p in items if p["sku"] in skus]
            if "slug" in params:
                items = [p for p in items if p["slug"] == params["slug"]]
            if "category" in params:
                cats = {int(c) for c in re.split(r"[\s,]+", params["category"]) if c.isdigit()}
                items = [p for p in items if any(c["id"] in cats for c in p["categories"])]
            if "tag" in params:
                tags = {int(t) for t in re.split(r"[\s,]+", params["tag"]) if t.isdigit()}
                items = [p for p in items if any(t["id"] in tags for t in p["tags"])]
            if "featured" in params:
                flag = params["featured"].lower() in ("1", "true")
                items = [p for p in items if p["featured"] == flag]
            if "on_sale" in params:
                flag = params["on_sale"].lower() in ("1", "true")
                items = [p for p in items if p["on_sale"] == flag]
            if params.get("search"):
                needle = params["search"].lower()
                items = [p for p in items if needle in p["name"].lower()
                         or needle in p["description"].lower() or needle in p["short_description"].lower()]
            items = self._filter_dates(items, params)
            orderby, reverse = params["orderby"], params["order"] == "desc"
            if orderby == "include" and params["include"]:
                rank = {pid: n for n, pid in enumerate(params["include"])}
                items.sort(key=lambda p: rank.get(p["id"], 0))
            else:
                keyfunc = {
                    "date": lambda p: (p["date_created_gmt"], p["id"]),
                    "id": lambda p: (p["id"],),
                    "include": lambda p: (p["date_created_gmt"], p["id"]),
                    "title": lambda p: (p["name"].lower(), p["id"]),
                    "slug": lambda p: (p["slug"], p["id"]),
                    "modified": lambda p: (p["date_modified_gmt"], p["id"]),
                    "menu_order": lambda p: (p["menu_order"], p["name"].lower()),
                    "price": lambda p: (number(p["price"]) or 0.0, p["id"]),
                    "popularity": lambda p: (p["total_sales"], p["id"]),
                    "rating": lambda p: (float(p["average_rating"] or 0), p["id"]),
                }[orderby]
                items.sort(key=keyfunc, reverse=reverse)
            total = len(items)
            per_page, page = params["per_page"], params["page"]
            start = params["offset"] if params.get("offset") is not None else (page - 1) * per_page
            chunk = items[start:start + per_page]
            data = [self._fields(copy.deepcopy(p), query) for p in chunk]
        return self._headers_for(data, total, params, query, "/products")

    @staticmethod
    def _fields(obj: dict, query: dict) -> dict:
        raw = query.get("_fields")
        if not raw:
            return obj
        raw = ",".join(raw) if isinstance(raw, list) else raw
        wanted = [f.strip() for f in raw.split(",") if f.strip()]
        out: dict = {}
        for field in wanted:
            head, _, rest = field.partition(".")
            if head not in obj:
                continue
            if rest and isinstance(obj[head], dict):
                sub = RoutesMixin._fields(obj[head], {"_fields": rest})
                out.setdefault(head, {}).update(sub)
            else:
                out[head] = obj[head]
        return out

    def _category_json(self, c: dict) -> dict:
        count = sum(1 for p in self._products.values()
                    if p["status"] == "publish" and any(x["id"] == c["id"] for x in p["categories"]))
        return {"id": c["id"], "name": c["name"], "slug": c["slug"], "parent": c.get("parent", 0),
                "description": "", "display": "default", "image": None, "menu_order": 0, "count": count,
                "_links": {"self": [{"href": f"{self.links_url}/products/categories/{c['id']}"}],
                           "collection": [{"href": f"{self.links_url}/products/categories"}]}}
