"""Variations of a variable product: their attributes and permalinks, the parent's prices and
stock synced from them, and a variation read as a product (``GET /products/<variation id>``)."""
from __future__ import annotations

import copy
from datetime import datetime
from typing import Any

from fakes.woocommerce.wordpress import parse_gmt, slugify


class VariationsMixin:
    """The variations of the catalogue's variable products."""

    def _variation_attributes(self, parent: dict, attrs: Any) -> list[dict]:
        if isinstance(attrs, dict):
            attrs = [{"name": k, "option": v} for k, v in attrs.items()]
        out = []
        by_name = {a["name"].lower(): a for a in parent.get("attributes", [])}
        for a in attrs or []:
            option = a.get("option")
            if option in (None, ""):
                continue  # "Any <attribute>": WooCommerce leaves it out of the variation
            pa = by_name.get(str(a.get("name", "")).lower())
            attr_id = a.get("id", pa["id"] if pa else 0)
            out.append({"id": attr_id, "name": pa["name"] if pa else a.get("name"), "option": option})
        return out

    def _add_variation(self, parent: dict, spec: dict) -> dict:
        vid = spec.pop("id", None)
        vid = int(vid) if vid else self._new_id()
        self._reserve_id(vid)
        created = spec.pop("date_created_gmt", None) or spec.pop("date_created", None)
        created_dt = (created if isinstance(created, datetime) else parse_gmt(created)) \
            or parse_gmt(parent["date_created_gmt"]) or self.now()
        modified = spec.pop("date_modified_gmt", None) or spec.pop("date_modified", None)
        modified_dt = (modified if isinstance(modified, datetime) else parse_gmt(modified)) or created_dt
        c_local, c_gmt = self._dates(created_dt)
        m_local, m_gmt = self._dates(modified_dt)
        attrs = self._variation_attributes(parent, spec.pop("attributes", []))
        image = self._image(spec.pop("image", None), created_dt)
        query = "&".join(
            f"attribute_{'pa_' + slugify(a['name']) if a['id'] else slugify(a['name'])}="
            f"{slugify(a['option']) if a['id'] else a['option']}" for a in attrs)
        v = {
            "id": vid, "date_created": c_local, "date_created_gmt": c_gmt,
            "date_modified": m_local, "date_modified_gmt": m_gmt, "description": "",
            "permalink": f"{self.site_url}/product/{parent['slug']}/" + (f"?{query}" if query else ""),
            "sku": "", "price": "", "regular_price": "", "sale_price": "",
            "date_on_sale_from": None, "date_on_sale_from_gmt": None,
            "date_on_sale_to": None, "date_on_sale_to_gmt": None, "on_sale": False,
            "status": "publish", "purchasable": True, "virtual": False, "downloadable": False,
            "downloads": [], "download_limit": -1, "download_expiry": -1,
            "tax_status": "taxable", "tax_class": "", "manage_stock": False,
            "stock_quantity": None, "stock_status": "instock", "backorders": "no",
            "backorders_allowed": False, "backordered": False, "weight": "",
            "dimensions": {"length": "", "width": "", "height": ""}, "shipping_class": "",
            "shipping_class_id": 0, "image": image, "attributes": attrs, "menu_order": 0,
            "meta_data": [], "_links": {},
        }
        if "meta_data" in spec:
            spec["meta_data"] = self._meta(spec["meta_data"])
        self._apply_prices(v, spec)
        for key, value in spec.items():
            v[key] = value
        if v["stock_quantity"] is not None and "manage_stock" not in spec:
            v["manage_stock"] = True
        v["purchasable"] = v["price"] != "" and v["status"] == "publish"
        base = f"{self.links_url}/products/{parent['id']}/variations"
        v["_links"] = {"self": [{"href": f"{base}/{vid}"}], "collection": [{"href": base}],
                       "up": [{"href": f"{self.links_url}/products/{parent['id']}"}]}
        self._variations.setdefault(parent["id"], {})[vid] = v
        self._variation_parent[vid] = parent["id"]
        return v

    def _sync_parent(self, p: dict) -> None:
        """WC_Product_Variable::sync: prices, on_sale and stock status from the children."""
        children = [v for v in self._variations.get(p["id"], {}).values() if v["status"] == "publish"]
        p["variations"] = [v["id"] for v in sorted(
            self._variations.get(p["id"], {}).values(),
            key=lambda v: (v["menu_order"], v["id"]))]
        priced = [v for v in children if v["price"] != ""]
        # A variable parent has no prices of its own: REST shows the lowest active
        # variation price as ``price`` and empty regular/sale prices.
        p["regular_price"] = p["sale_price"] = ""
        if priced:
            p["price"] = min((v["price"] for v in priced), key=float)
            p["on_sale"] = any(v["on_sale"] for v in priced)
        else:
            p["price"] = ""
            p["on_sale"] = False
        statuses = {v["stock_status"] for v in children}
        if "instock" in statuses:
            p["stock_status"] = "instock"
        elif "onbackorder" in statuses:
            p["stock_status"] = "onbackorder"
        elif children:
            p["stock_status"] = "outofstock"

    def _variation_as_product(self, v: dict) -> dict:
        """What ``GET /products/<variation id>`` returns (and a webhook for a variation)."""
        parent = self._products[self._variation_parent[v["id"]]]
        p = self._template()
        for key in p:
            if key in v and key not in ("_links",):
                p[key] = copy.deepcopy(v[key])
        options = ", ".join(a["option"] for a in v["attributes"])
        p["name"] = parent["name"] + (f" - {options}" if options else "")
        p["slug"] = slugify(p["name"])
        p["type"] = "variation"
        p["parent_id"] = parent["id"]
        p["permalink"] = v["permalink"]
        p["catalog_visibility"] = "visible"
        p["images"] = [copy.deepcopy(v["image"])] if v.get("image") else []
        p["attributes"] = copy.deepcopy(v["attributes"])
        p["price_html"] = self._amount(float(v["price"])) if v["price"] != "" else ""
        p["_links"] = {"self": [{"href": f"{self.links_url}/products/{v['id']}"}],
                       "collection": [{"href": f"{self.links_url}/products"}],
                       "up": [{"href": f"{self.links_url}/products/{parent['id']}"}]}
        return p
