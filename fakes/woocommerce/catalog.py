"""The catalogue a test reads and changes: products and variations by ID, and the
mutations WooCommerce's admin makes (each bumps ``date_modified`` and may fire a webhook)."""
from __future__ import annotations

import copy
from datetime import datetime, timedelta, timezone
from typing import Iterable, Optional

from fakes.woocommerce.wordpress import parse_gmt, wp_datetime


class CatalogMixin:
    """Reading and changing the catalogue, under the store's lock."""

    @property
    def products(self) -> list[dict]:
        with self._lock:
            return [copy.deepcopy(p) for _, p in sorted(self._products.items())]

    def get(self, product_id: int) -> Optional[dict]:
        with self._lock:
            p = self._products.get(int(product_id))
            return copy.deepcopy(p) if p is not None else None

    def variations_of(self, product_id: int) -> list[dict]:
        with self._lock:
            return [copy.deepcopy(v) for _, v in
                    sorted(self._variations.get(int(product_id), {}).items())]

    def product_ids(self, status: Optional[str] = None) -> list[int]:
        with self._lock:
            return sorted(i for i, p in self._products.items()
                          if status is None or p["status"] == status)

    def add(self, product: dict, variations: Optional[Iterable[dict]] = None, *,
            verbatim: bool = False) -> dict:
        """Add a product. ``product`` may be a full WC JSON object (e.g. a docs example) or
        a partial spec (name, type, regular_price, sale_price, categories as names or
        ``"A > B"`` paths, tags as names, images as URLs, attributes with
        name/options/visible/variation, meta_data as a dict...). Descriptions are taken
        as HTML, verbatim. ``verbatim=True`` stores a real payload untouched (it must
        have an ``id``), so that the API and webhooks return it byte for byte.
        Returns the stored product."""
        if verbatim:
            with self._lock:
                p = copy.deepcopy(product)
                self._reserve_id(p["id"])
                for c in p.get("categories", []):
                    self._categories.setdefault(c["id"], {**c, "parent": 0})
                for t in p.get("tags", []):
                    self._tags.setdefault(t["id"], dict(t))
                self._products[p["id"]] = p
                self._variations.setdefault(p["id"], {})
                for spec in variations or ():
                    v = copy.deepcopy(spec)
                    self._variations[p["id"]][v["id"]] = v
                    self._variation_parent[v["id"]] = p["id"]
                result = copy.deepcopy(p)
            self._auto("product.created", result["id"])
            return result
        with self._lock:
            p = self._build_product(dict(product))
            self._products[p["id"]] = p
            self._variations.setdefault(p["id"], {})
            for spec in variations or ():
                self._add_variation(p, dict(spec))
            if p["type"] == "variable":
                self._sync_parent(p)
            self._finish_product(p)
            result = copy.deepcopy(p)
        self._auto("product.created", result["id"])
        return result

    def add_variation(self, product_id: int, variation: dict) -> dict:
        with self._lock:
            parent = self._require(product_id)
            v = self._add_variation(parent, dict(variation))
            self._sync_parent(parent)
            self._bump(parent)
            result = copy.deepcopy(v)
        self._auto("product.created", result["id"])
        return result

    def update(self, product_id: int, **fields) -> dict:
        """Change fields of a product and bump ``date_modified(_gmt)`` by ≥ 1 s.
        ``price=`` alone sets the regular price (and clears a sale); ``regular_price`` /
        ``sale_price`` recompute ``price``; categories/tags/images accept names/URLs."""
        with self._lock:
            p = self._require(product_id)
            self._apply_fields(p, fields)
            if p["type"] == "variable":
                self._sync_parent(p)
            self._bump(p)
            self._finish_product(p)
            result = copy.deepcopy(p)
        self._auto("product.updated", product_id)
        return result

    def update_variation(self, product_id: int, variation_id: int, **fields) -> dict:
        """Change a variation; bumps the variation's and its parent's date_modified."""
        with self._lock:
            parent = self._require(product_id)
            v = self._variations.get(parent["id"], {}).get(int(variation_id))
            if v is None:
                raise KeyError(f"variation {variation_id} of {product_id} not found")
            if "attributes" in fields:
                fields["attributes"] = self._variation_attributes(parent, fields["attributes"])
            if "image" in fields:
                fields["image"] = self._image(fields["image"], self.now())
            self._apply_prices(v, fields)
            for key, value in fields.items():
                v[key] = value
            self._bump(v)
            self._sync_parent(parent)
            self._bump(parent)
            self._finish_product(parent)
            result = copy.deepcopy(v)
        self._auto("product.updated", variation_id)
        return result

    def unpublish(self, product_id: int, status: str = "draft") -> dict:
        return self.update(product_id, status=status)

    def hide(self, product_id: int) -> dict:
        return self.update(product_id, catalog_visibility="hidden")

    def delete(self, product_id: int, force: bool = False) -> None:
        """Move to trash (status ``trash``: gone from ``status=any`` listings, still
        readable by ID), or with ``force=True`` delete for good (404 afterwards)."""
        with self._lock:
            p = self._require(product_id)
            if force:
                del self._products[p["id"]]
                for vid in self._variations.pop(p["id"], {}):
                    self._variation_parent.pop(vid, None)
            else:
                p["status"] = "trash"
                if not p["slug"].endswith("__trashed"):
                    p["slug"] += "__trashed"
                self._bump(p)
        if not force:
            self._auto("product.deleted", product_id)

    def restore(self, product_id: int) -> dict:
        with self._lock:
            p = self._require(product_id)
            p["status"] = "publish"
            p["slug"] = p["slug"].replace("__trashed", "")
            self._bump(p)
            result = copy.deepcopy(p)
        self._auto("product.restored", product_id)
        return result

    def _require(self, product_id: int) -> dict:
        p = self._products.get(int(product_id))
        if p is None:
            raise KeyError(f"product {product_id} not found")
        return p

    def _bump(self, obj: dict) -> None:
        now = self.now()
        prev = parse_gmt(obj.get("date_modified_gmt"))
        new = now if prev is None or now >= prev + timedelta(seconds=1) else prev + timedelta(seconds=1)
        obj["date_modified"] = wp_datetime((new + self.utc_offset).replace(tzinfo=None))
        obj["date_modified_gmt"] = wp_datetime(new.replace(tzinfo=None))

    def _dates(self, dt_gmt: datetime) -> tuple[str, str]:
        dt_gmt = dt_gmt.astimezone(timezone.utc).replace(microsecond=0)
        return (wp_datetime((dt_gmt + self.utc_offset).replace(tzinfo=None)),
                wp_datetime(dt_gmt.replace(tzinfo=None)))
