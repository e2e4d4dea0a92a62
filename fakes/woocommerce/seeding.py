"""Filling a store: WooCommerce's own sample CSV (the importer's columns), or ``n``
deterministic synthetic products for benchmarks."""
from __future__ import annotations

import csv
import hashlib
import random
from datetime import datetime, timedelta, timezone
from typing import Any

from fakes.woocommerce.wordpress import decimal_str, slugify, wpautop


class _Hybrid:
    """A method callable on the class (builds a new store) or on an instance (loads into it)."""

    def __init__(self, func):
        self.func = func
        self.__doc__ = func.__doc__

    def __get__(self, obj, cls):
        func = self.func
        if obj is not None:
            def bound(*args, **kwargs):
                return func(obj, *args, **kwargs)
        else:
            def bound(*args, **kwargs):
                ctor = {k: kwargs.pop(k) for k in list(kwargs) if k in cls.CONSTRUCTOR_ARGS}
                return func(cls(**ctor), *args, **kwargs)
        bound.__doc__ = func.__doc__
        return bound


class SeedingMixin:
    """``from_sample_csv`` and ``generate``, on the class (a new store) or on a store."""

    @_Hybrid
    def from_sample_csv(self, path: str) -> "FakeWooStore":
        """Load WooCommerce's product CSV (the official ``sample_products.csv``) into the
        store. Call on the class for a new store (constructor kwargs accepted) or on an
        instance to load into it."""
        with open(path, newline="", encoding="utf-8-sig") as fh:
            rows = list(csv.DictReader(fh))
        with self._lock:
            base = datetime(2024, 1, 15, 9, 0, 0, tzinfo=timezone.utc)
            sku_to_id: dict[str, int] = {}
            pending_variations: list[tuple[int, dict]] = []
            grouped: dict[int, str] = {}
            for n, row in enumerate(rows):
                when = base + timedelta(minutes=n)
                kinds = [k.strip() for k in (row.get("Type") or "simple").split(",")]
                if "variation" in kinds:
                    pending_variations.append((n, row))
                    continue
                ptype = next((k for k in kinds if k in ("simple", "variable", "grouped", "external")), "simple")
                spec = self._spec_from_row(row, ptype, kinds, when)
                used_for_variations = self._variation_attr_names(rows, row)
                for a in spec.get("attributes", []):
                    a["variation"] = ptype == "variable" and a["name"].lower() in used_for_variations
                p = self._build_product(spec)
                self._products[p["id"]] = p
                self._variations.setdefault(p["id"], {})
                if row.get("SKU"):
                    sku_to_id[row["SKU"].strip()] = p["id"]
                if row.get("Grouped products"):
                    grouped[p["id"]] = row["Grouped products"]
            for n, row in pending_variations:
                parent_ref = (row.get("Parent") or "").strip()
                parent_id = int(parent_ref[3:]) if parent_ref.startswith("id:") else sku_to_id.get(parent_ref)
                parent = self._products.get(parent_id) if parent_id else None
                if parent is None:
                    continue
                when = base + timedelta(minutes=n)
                attrs = []
                for i in range(1, 10):
                    name = (row.get(f"Attribute {i} name") or "").strip()
                    if name:
                        attrs.append({"name": name, "option": (row.get(f"Attribute {i} value(s)") or "").strip()})
                images = [u.strip() for u in (row.get("Images") or "").split(",") if u.strip()]
                spec = {
                    "id": int(row["ID"]) if row.get("ID") else None, "sku": row.get("SKU", "").strip(),
                    "description": wpautop(row.get("Description", "")),
                    "regular_price": row.get("Regular price", ""), "sale_price": row.get("Sale price", ""),
                    "stock_status": self._stock_status(row.get("In stock?", "1")),
                    "menu_order": int(row.get("Position") or 0), "attributes": attrs,
                    "image": images[0] if images else None, "date_created": when,
                    "status": "publish" if (row.get("Published") or "1").strip() == "1" else "private",
                    "weight": decimal_str(row.get("Weight (lbs)")),
                }
                if (row.get("Stock") or "").strip():
                    spec["stock_quantity"] = int(float(row["Stock"]))
                v = self._add_variation(parent, spec)
                if v["sku"]:
                    sku_to_id[v["sku"]] = v["id"]
            for pid, refs in grouped.items():
                ids = []
                for ref in [r.strip() for r in refs.split(",") if r.strip()]:
                    ref_id = int(ref[3:]) if ref.startswith("id:") else sku_to_id.get(ref)
                    if ref_id:
                        ids.append(ref_id)
                self._products[pid]["grouped_products"] = ids
            for p in self._products.values():
                for key in ("upsell_ids", "cross_sell_ids"):
                    if f"_{key}_refs" in p:
                        refs = p.pop(f"_{key}_refs")
                        p[key] = [sku_to_id[r.strip()] for r in refs.split(",") if r.strip() in sku_to_id]
            self._finalize_all()
        return self

    @staticmethod
    def _stock_status(value: str) -> str:
        value = (value or "").strip().lower()
        if value in ("1", "yes", "instock", "true"):
            return "instock"
        if value in ("backorder", "onbackorder"):
            return "onbackorder"
        return "outofstock"

    @staticmethod
    def _variation_attr_names(rows: list[dict], parent_row: dict) -> set[str]:
        sku = (parent_row.get("SKU") or "").strip()
        pid = f"id:{parent_row.get('ID')}"
        names = set()
        for row in rows:
            if (row.get("Parent") or "").strip() in (sku, pid) and sku:
                for i in range(1, 10):
                    name = (row.get(f"Attribute {i} name") or "").strip()
                    if name:
                        names.add(name.lower())
        return names

    def _spec_from_row(self, row: dict, ptype: str, kinds: list[str], when: datetime) -> dict:
        published = (row.get("Published") or "1").strip()
        status = {"1": "publish", "0": "private", "-1": "draft"}.get(published, "publish")
        attrs = []
        for i in range(1, 10):
            name = (row.get(f"Attribute {i} name") or "").strip()
            if not name:
                continue
            attrs.append({"name": name, "options": row.get(f"Attribute {i} value(s)", ""),
                          "visible": (row.get(f"Attribute {i} visible") or "0").strip() == "1",
                          "global": (row.get(f"Attribute {i} global") or "0").strip() == "1"})
        meta = {k[len("Meta: "):]: v for k, v in row.items() if k and k.startswith("Meta: ") and v not in (None, "")}
        downloads = []
        for i in range(1, 10):
            name, url = row.get(f"Download {i} name"), row.get(f"Download {i} URL")
            if url:
                downloads.append({"id": hashlib.md5(url.encode()).hexdigest(), "name": name or "", "file": url})
        spec: dict[str, Any] = {
            "id": int(row["ID"]) if (row.get("ID") or "").strip() else None,
            "type": ptype, "sku": (row.get("SKU") or "").strip(), "name": (row.get("Name") or "").strip(),
            "status": status, "featured": (row.get("Is featured?") or "0").strip() == "1",
            "catalog_visibility": (row.get("Visibility in catalog") or "visible").strip(),
            "short_description": wpautop(row.get("Short description", "")),
            "description": wpautop(row.get("Description", "")),
            "tax_status": (row.get("Tax status") or "taxable").strip(),
            "tax_class": (row.get("Tax class") or "").strip(),
            "stock_status": self._stock_status(row.get("In stock?", "1")),
            "backorders": {"1": "yes", "notify": "notify"}.get((row.get("Backorders allowed?") or "0").strip(), "no"),
            "sold_individually": (row.get("Sold individually?") or "0").strip() == "1",
            "weight": decimal_str(row.get("Weight (lbs)")),
            "dimensions": {"length": decimal_str(row.get("Length (in)")),
                           "width": decimal_str(row.get("Width (in)")),
                           "height": decimal_str(row.get("Height (in)"))},
            "reviews_allowed": (row.get("Allow customer reviews?") or "1").strip() == "1",
            "purchase_note": row.get("Purchase note") or "",
            "categories": [c.strip() for c in (row.get("Categories") or "").split(",") if c.strip()],
            "tags": [t.strip() for t in (row.get("Tags") or "").split(",") if t.strip()],
            "shipping_class": (row.get("Shipping class") or "").strip(),
            "images": [u.strip() for u in (row.get("Images") or "").split(",") if u.strip()],
            "download_limit": int(row["Download limit"]) if (row.get("Download limit") or "").strip() else -1,
            "download_expiry": int(row["Download expiry days"]) if (row.get("Download expiry days") or "").strip() else -1,
            "external_url": (row.get("External URL") or "").strip(),
            "button_text": (row.get("Button text") or "").strip(),
            "menu_order": int(row.get("Position") or 0),
            "attributes": attrs, "meta_data": meta, "downloads": downloads,
            "virtual": "virtual" in kinds, "downloadable": "downloadable" in kinds,
            "date_created": when,
            "_upsell_ids_refs": row.get("Upsells") or "", "_cross_sell_ids_refs": row.get("Cross-sells") or "",
        }
        if spec["virtual"]:
            spec["shipping_required"] = False
        if (row.get("Stock") or "").strip():
            spec["stock_quantity"] = int(float(row["Stock"]))
        if ptype in ("simple", "external"):
            spec["regular_price"] = row.get("Regular price", "")
            spec["sale_price"] = row.get("Sale price", "")
        return spec

    @_Hybrid
    def generate(self, n: int, *, seed: int = 0, variable_ratio: float = 0.2,
                 draft_ratio: float = 0.0, hidden_ratio: float = 0.0,
                 out_of_stock_ratio: float = 0.1) -> "FakeWooStore":
        """Add ``n`` synthetic products (deterministic for a seed). ``variable_ratio`` of
        them are variable with 2–6 Color/Size variations. Fast: 5,000 in well under 2 s.
        Call on the class for a new store, or on an instance to add to it."""
        rng = random.Random(seed)
        adjectives = ["Classic", "Organic", "Vintage", "Slim", "Heavy", "Light", "Premium",
                      "Everyday", "Outdoor", "Urban", "Cozy", "Sport", "Travel", "Eco", "Deluxe"]
        materials = ["Cotton", "Wool", "Linen", "Leather", "Denim", "Bamboo", "Merino", "Canvas",
                     "Ceramic", "Oak", "Steel", "Glass"]
        nouns = {
            "Clothing > Tshirts": ["T-Shirt", "Tee", "Polo", "Tank Top"],
            "Clothing > Hoodies": ["Hoodie", "Sweatshirt", "Zip Hoodie"],
            "Clothing > Accessories": ["Beanie", "Cap", "Scarf", "Belt", "Sunglasses"],
            "Decor": ["Vase", "Lamp", "Pennant", "Poster", "Cushion"],
            "Kitchen": ["Mug", "Bowl", "Cutting Board", "Teapot"],
            "Music": ["Album", "Single", "Vinyl"],
        }
        colours = ["Black", "White", "Red", "Blue", "Green", "Gray", "Yellow", "Navy"]
        sizes = ["Small", "Medium", "Large", "XL"]
        tags_pool = ["summer", "gift", "bestseller", "new", "sale", "limited", "eco"]
        cat_paths = list(nouns)
        with self._lock:
            base = datetime(2024, 3, 1, 8, 0, 0, tzinfo=timezone.utc)
            start_id = max([self._next_id, *self._products, *self._variation_parent, 1000]) + 1
            self._next_id = start_id
            for i in range(n):
                cat = cat_paths[i % len(cat_paths)]
                noun = rng.choice(nouns[cat])
                name = f"{rng.choice(adjectives)} {rng.choice(materials)} {noun} {i + 1}"
                when = base + timedelta(seconds=i)
                variable = rng.random() < variable_ratio
                status = "draft" if rng.random() < draft_ratio else "publish"
                regular = round(rng.uniform(5, 250), 2)
                on_sale = rng.random() < 0.15
                colour_opts = rng.sample(colours, rng.randint(1, 3))
                desc = (f"<p>The {name.lower()} is made of {rng.choice(materials).lower()} and "
                        f"built for {rng.choice(['daily use', 'long trips', 'cold days', 'the beach', 'the office'])}."
                        f"</p>\n<ul>\n<li>Colour: {', '.join(colour_opts)}</li>\n"
                        f"<li>Care: {rng.choice(['machine wash', 'hand wash', 'wipe clean'])}</li>\n</ul>\n")
                spec: dict[str, Any] = {
                    "name": name, "slug": f"{slugify(name)}", "type": "variable" if variable else "simple",
                    "status": status,
                    "catalog_visibility": "hidden" if rng.random() < hidden_ratio else "visible",
                    "sku": f"GEN-{i + 1:06d}",
                    "short_description": f"<p>{rng.choice(adjectives)} {noun.lower()} for every day.</p>\n",
                    "description": desc, "categories": [cat],
                    "tags": rng.sample(tags_pool, rng.randint(0, 2)),
                    "images": [f"{self.site_url}/wp-content/uploads/2024/03/{slugify(name)}.jpg"],
                    "date_created": when,
                    "stock_status": "outofstock" if rng.random() < out_of_stock_ratio else "instock",
                    "attributes": [{"name": "Color", "options": colour_opts, "visible": True,
                                    "variation": variable, "global": True}],
                }
                if variable:
                    size_opts = rng.sample(sizes, rng.randint(1, 2))
                    spec["attributes"].append({"name": "Size", "options": size_opts, "visible": True,
                                               "variation": True, "global": True})
                else:
                    spec["regular_price"] = f"{regular:.2f}"
                    if on_sale:
                        spec["sale_price"] = f"{regular * 0.8:.2f}"
                p = self._build_product(spec)
                self._products[p["id"]] = p
                self._variations.setdefault(p["id"], {})
                if variable:
                    for colour in colour_opts:
                        for size in size_opts:
                            price = round(regular + rng.choice([0, 0, 5, 10]), 2)
                            self._add_variation(p, {
                                "sku": f"{spec['sku']}-{colour[:3].upper()}-{size[:1]}",
                                "regular_price": f"{price:.2f}",
                                "sale_price": f"{price * 0.8:.2f}" if on_sale else "",
                                "stock_status": "outofstock" if rng.random() < out_of_stock_ratio else "instock",
                                "attributes": {"Color": colour, "Size": size},
                                "date_created": when,
                            })
            self._finalize_all()
        return self
