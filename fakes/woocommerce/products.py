"""Building a product in WooCommerce's exact JSON shape from a full payload or a partial
spec: IDs, terms (categories, tags), images, attributes, meta, prices and ``price_html``."""
from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Optional

from fakes.woocommerce.wordpress import number, parse_gmt, price_str, slugify

_CURRENCY_SYMBOLS = {
    "EUR": "&euro;", "USD": "&#36;", "GBP": "&pound;", "CHF": "CHF", "JPY": "&yen;",
    "SEK": "&#107;&#114;", "NOK": "&#107;&#114;", "DKK": "kr.", "PLN": "&#122;&#322;",
    "CAD": "&#36;", "AUD": "&#36;",
}


class ProductsMixin:
    """A product's fields as WooCommerce computes them."""

    def _new_id(self) -> int:
        while self._next_id in self._products or self._next_id in self._variation_parent:
            self._next_id += 1
        value = self._next_id
        self._next_id += 1
        return value

    def _reserve_id(self, value: int) -> None:
        self._next_id = max(self._next_id, int(value) + 1)

    def _term(self, registry: dict, name: str, parent: int = 0) -> dict:
        for term in registry.values():
            if term["name"] == name and term.get("parent", 0) == parent:
                return term
        term_id = self._next_term_id
        self._next_term_id += 1
        slug = slugify(name)
        if any(t["slug"] == slug for t in registry.values()):
            slug = f"{slug}-{term_id}"
        term = {"id": term_id, "name": name, "slug": slug, "parent": parent}
        registry[term_id] = term
        return term

    def _categories_for(self, items: Any) -> list[dict]:
        out = []
        for item in items or []:
            if isinstance(item, dict):
                if "id" in item and item["id"] in self._categories and "name" not in item:
                    term = self._categories[item["id"]]
                elif "name" in item:
                    term = None
                    if "id" in item and item["id"] in self._categories:
                        term = self._categories[item["id"]]
                    if term is None:
                        term = self._term(self._categories, item["name"])
                        if "id" in item and item["id"] not in self._categories:
                            # keep the caller's id
                            del self._categories[term["id"]]
                            term["id"] = int(item["id"])
                            if item.get("slug"):
                                term["slug"] = item["slug"]
                            self._categories[term["id"]] = term
                else:
                    continue
            else:
                parent = 0
                term = None
                path = [s.strip() for s in str(item).split(">") if s.strip()]
                if len(path) == 1:  # a bare name: reuse an existing term wherever it sits
                    term = next((t for t in self._categories.values() if t["name"] == path[0]), None)
                    path = [] if term else path
                # WooCommerce's CSV importer creates the path but assigns only the leaf.
                for part in path:
                    term = self._term(self._categories, part, parent)
                    parent = term["id"]
                if term is None:
                    continue
            out.append({"id": term["id"], "name": term["name"], "slug": term["slug"]})
        return out

    def _tags_for(self, items: Any) -> list[dict]:
        out = []
        for item in items or []:
            name = item.get("name") if isinstance(item, dict) else str(item).strip()
            if not name:
                continue
            term = self._term(self._tags, name)
            out.append({"id": term["id"], "name": term["name"], "slug": term["slug"]})
        return out

    def _image(self, item: Any, when: datetime) -> Optional[dict]:
        if not item:
            return None
        if isinstance(item, dict) and "src" not in item:
            return None
        src = item["src"] if isinstance(item, dict) else str(item).strip()
        local, gmt = self._dates(when)
        image_id = item.get("id") if isinstance(item, dict) else None
        if not image_id:
            image_id = self._next_image_id
            self._next_image_id += 1
        name = item.get("name") if isinstance(item, dict) else None
        if name is None:
            name = re.sub(r"\.[a-z0-9]+$", "", src.rsplit("/", 1)[-1], flags=re.I)
        return {"id": image_id, "date_created": local, "date_created_gmt": gmt,
                "date_modified": local, "date_modified_gmt": gmt, "src": src,
                "name": name, "alt": item.get("alt", "") if isinstance(item, dict) else ""}

    def _attribute(self, item: dict, position: int) -> dict:
        name = item.get("name") or ""
        options = item.get("options", [])
        if isinstance(options, str):
            options = [o.strip() for o in options.split(",") if o.strip()]
        attr_id = item.get("id")
        if attr_id is None:
            if item.get("global"):
                attr_id = self._attr_ids.setdefault(name.lower(), len(self._attr_ids) + 1)
            else:
                attr_id = self._attr_ids.get(name.lower(), 0) if item.get("global") is None else 0
        return {"id": int(attr_id), "name": name, "position": item.get("position", position),
                "visible": bool(item.get("visible", True)),
                "variation": bool(item.get("variation", False)), "options": list(options)}

    def _meta(self, meta: Any) -> list[dict]:
        if not meta:
            return []
        items = meta.items() if isinstance(meta, dict) else [
            (m["key"], m.get("value")) for m in meta]
        out = []
        for key, value in items:
            out.append({"id": self._next_meta_id, "key": key, "value": value})
            self._next_meta_id += 1
        return out

    def _template(self) -> dict:
        return {
            "id": 0, "name": "", "slug": "", "permalink": "",
            "date_created": None, "date_created_gmt": None,
            "date_modified": None, "date_modified_gmt": None,
            "type": "simple", "status": "publish", "featured": False,
            "catalog_visibility": "visible", "description": "", "short_description": "",
            "sku": "", "price": "", "regular_price": "", "sale_price": "",
            "date_on_sale_from": None, "date_on_sale_from_gmt": None,
            "date_on_sale_to": None, "date_on_sale_to_gmt": None,
            "price_html": "", "on_sale": False, "purchasable": False, "total_sales": 0,
            "virtual": False, "downloadable": False, "downloads": [],
            "download_limit": -1, "download_expiry": -1, "external_url": "",
            "button_text": "", "tax_status": "taxable", "tax_class": "",
            "manage_stock": False, "stock_quantity": None, "stock_status": "instock",
            "backorders": "no", "backorders_allowed": False, "backordered": False,
            "sold_individually": False, "weight": "",
            "dimensions": {"length": "", "width": "", "height": ""},
            "shipping_required": True, "shipping_taxable": True, "shipping_class": "",
            "shipping_class_id": 0, "reviews_allowed": True, "average_rating": "0.00",
            "rating_count": 0, "related_ids": [], "upsell_ids": [], "cross_sell_ids": [],
            "parent_id": 0, "purchase_note": "", "categories": [], "tags": [], "images": [],
            "attributes": [], "default_attributes": [], "variations": [],
            "grouped_products": [], "menu_order": 0, "meta_data": [], "_links": {},
        }

    def _build_product(self, spec: dict) -> dict:
        p = self._template()
        pid = spec.pop("id", None)
        if pid and (int(pid) in self._products or int(pid) in self._variation_parent):
            raise ValueError(f"id {pid} already exists")
        p["id"] = int(pid) if pid else self._new_id()
        self._reserve_id(p["id"])
        created = spec.pop("date_created_gmt", None) or spec.pop("date_created", None)
        modified = spec.pop("date_modified_gmt", None) or spec.pop("date_modified", None)
        spec.pop("date_created", None), spec.pop("date_modified", None)
        created_dt = (created if isinstance(created, datetime) else parse_gmt(created)) or self.now()
        modified_dt = (modified if isinstance(modified, datetime) else parse_gmt(modified)) or created_dt
        p["date_created"], p["date_created_gmt"] = self._dates(created_dt)
        p["date_modified"], p["date_modified_gmt"] = self._dates(modified_dt)
        spec.pop("_links", None)
        spec.pop("permalink", None)
        spec.pop("price_html", None)
        spec.pop("variations", None)
        if "categories" in spec:
            spec["categories"] = self._categories_for(spec["categories"])
        if "tags" in spec:
            spec["tags"] = self._tags_for(spec["tags"])
        if "images" in spec:
            spec["images"] = [i for i in (self._image(x, created_dt) for x in spec["images"]) if i]
        if "attributes" in spec:
            spec["attributes"] = [self._attribute(a, n) for n, a in enumerate(spec["attributes"])]
            for a in spec["attributes"]:
                if a["id"]:
                    self._attr_ids.setdefault(a["name"].lower(), a["id"])
        if "meta_data" in spec:
            spec["meta_data"] = self._meta(spec["meta_data"])
        for key in ("regular_price", "sale_price", "price"):
            if key in spec:
                spec[key] = price_str(spec[key])
        if not spec.get("slug"):
            spec["slug"] = self._unique_slug(slugify(spec.get("name", "product")), p["id"])
        self._apply_prices(p, spec)
        for key, value in spec.items():
            p[key] = value
        if p["stock_quantity"] is not None and "manage_stock" not in spec:
            p["manage_stock"] = True
        return p

    def _unique_slug(self, slug: str, own_id: int) -> str:
        taken = {p["slug"] for i, p in self._products.items() if i != own_id}
        if slug not in taken:
            return slug
        n = 2
        while f"{slug}-{n}" in taken:
            n += 1
        return f"{slug}-{n}"

    @staticmethod
    def _apply_prices(obj: dict, fields: dict) -> None:
        """Keep price / regular_price / sale_price / on_sale consistent, as WC does."""
        for key in ("regular_price", "sale_price", "price"):
            if key in fields:
                fields[key] = price_str(fields[key])
        if "price" in fields and "regular_price" not in fields and "sale_price" not in fields:
            fields.setdefault("regular_price", fields["price"])
            fields.setdefault("sale_price", "")
        if "regular_price" in fields or "sale_price" in fields:
            regular = fields.get("regular_price", obj.get("regular_price", ""))
            sale = fields.get("sale_price", obj.get("sale_price", ""))
            r, s = number(regular), number(sale)
            on_sale = s is not None and (r is None or s < r)
            fields.setdefault("price", sale if on_sale else regular)
            fields.setdefault("on_sale", on_sale)

    def _apply_fields(self, p: dict, fields: dict) -> None:
        fields = dict(fields)
        when = self.now()
        if "categories" in fields:
            fields["categories"] = self._categories_for(fields["categories"])
        if "tags" in fields:
            fields["tags"] = self._tags_for(fields["tags"])
        if "images" in fields:
            fields["images"] = [i for i in (self._image(x, when) for x in fields["images"]) if i]
        if "attributes" in fields:
            fields["attributes"] = [self._attribute(a, n) for n, a in enumerate(fields["attributes"])]
        if "meta_data" in fields:
            fields["meta_data"] = self._meta(fields["meta_data"])
        if "name" in fields and "slug" not in fields:
            fields["slug"] = self._unique_slug(slugify(fields["name"]), p["id"])
        if "stock_quantity" in fields and "manage_stock" not in fields:
            fields["manage_stock"] = fields["stock_quantity"] is not None
        self._apply_prices(p, fields)
        for key, value in fields.items():
            p[key] = value

    def _amount(self, value: float) -> str:
        symbol = _CURRENCY_SYMBOLS.get(self.currency, self.currency)
        return ('<span class="woocommerce-Price-amount amount"><bdi>'
                f'<span class="woocommerce-Price-currencySymbol">{symbol}</span>{value:,.2f}'
                '</bdi></span>')

    def _price_html(self, p: dict) -> str:
        symbol = _CURRENCY_SYMBOLS.get(self.currency, self.currency)
        if p["type"] == "variable":
            prices = [float(v["price"]) for v in self._variations.get(p["id"], {}).values()
                      if v["status"] == "publish" and v["price"] != ""]
            if not prices:
                return ""
            lo, hi = min(prices), max(prices)
            return self._amount(lo) if lo == hi else f"{self._amount(lo)} &ndash; {self._amount(hi)}"
        if p["type"] == "grouped":
            children = [self._products.get(i) for i in p.get("grouped_products", [])]
            prices = [float(c["price"]) for c in children if c and c["price"] != ""]
            if not prices:
                return ""
            lo, hi = min(prices), max(prices)
            return self._amount(lo) if lo == hi else f"{self._amount(lo)} &ndash; {self._amount(hi)}"
        price = number(p["price"])
        if price is None:
            return ""
        regular = number(p["regular_price"])
        if p["on_sale"] and regular is not None:
            return (f'<del aria-hidden="true">{self._amount(regular)}</del> '
                    f'<span class="screen-reader-text">Original price was: {symbol}{regular:,.2f}.</span>'
                    f'<ins aria-hidden="true">{self._amount(price)}</ins>'
                    f'<span class="screen-reader-text">Current price is: {symbol}{price:,.2f}.</span>')
        return self._amount(price)

    def _finish_product(self, p: dict) -> None:
        if p["type"] == "grouped":
            children = [self._products.get(i) for i in p.get("grouped_products", [])]
            prices = [c["price"] for c in children if c and c["price"] != ""]
            p["price"] = min(prices, key=float) if prices else ""
        p["permalink"] = f"{self.site_url}/product/{p['slug']}/"
        p["price_html"] = self._price_html(p)
        p["purchasable"] = p["price"] != "" and p["status"] == "publish" if p["type"] != "external" \
            else bool(p["price"]) and p["status"] == "publish"
        p["backorders_allowed"] = p["backorders"] in ("yes", "notify")
        p["_links"] = {"self": [{"href": f"{self.links_url}/products/{p['id']}"}],
                       "collection": [{"href": f"{self.links_url}/products"}]}
        if p.get("parent_id"):
            p["_links"]["up"] = [{"href": f"{self.links_url}/products/{p['parent_id']}"}]

    def _finalize_all(self) -> None:
        by_cat: dict[int, list[int]] = {}
        for p in self._products.values():
            for c in p["categories"]:
                by_cat.setdefault(c["id"], []).append(p["id"])
        for p in self._products.values():
            if p["type"] == "variable":
                self._sync_parent(p)
            if not p["related_ids"]:
                related: list[int] = []
                for c in p["categories"]:
                    for other in by_cat.get(c["id"], []):
                        if other != p["id"] and other not in related:
                            related.append(other)
                        if len(related) >= 5:
                            break
                p["related_ids"] = related[:5]
        for p in self._products.values():
            self._finish_product(p)
