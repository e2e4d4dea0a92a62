"""Collection requests: WordPress' parameter validation (``per_page``, ``orderby``, dates as
``WP_Date_Query`` reads them), date filters, and the paging headers and links."""
from __future__ import annotations

import math
import re
from datetime import datetime, timedelta
from typing import Any, Optional

from fakes.woocommerce.errors import invalid_params
from fakes.woocommerce.wordpress import wp_datetime

_PRODUCT_STATUSES = ("any", "future", "trash", "draft", "pending", "private", "publish")

_PRODUCT_ORDERBY = ("date", "id", "include", "title", "slug", "modified", "menu_order",
                    "price", "popularity", "rating")

_DATE_RE = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}(?::?\d{2})?)?$")


class QueriesMixin:
    """Parameters and pages of the list routes."""

    def _collection_params(self, query: dict, products: bool) -> dict:
        errors: dict[str, tuple[str, str]] = {}
        out: dict[str, Any] = {}

        def single(key: str) -> Optional[str]:
            value = query.get(key)
            return value[-1] if isinstance(value, list) else value

        def integer(key: str, default: Optional[int], lo: Optional[int], hi: Optional[int]) -> None:
            raw = single(key)
            if raw is None:
                out[key] = default
                return
            try:
                value = int(raw.strip())
            except ValueError:
                errors[key] = ("rest_invalid_type", f"{key} is not of type integer.")
                return
            if lo is not None and hi is not None and not lo <= value <= hi:
                errors[key] = ("rest_out_of_bounds", f"{key} must be between {lo} (inclusive) and {hi} (inclusive)")
            elif lo is not None and value < lo:
                errors[key] = ("rest_out_of_bounds", f"{key} must be greater than or equal to {lo}")
            else:
                out[key] = value

        def enum(key: str, default: str, values: tuple) -> None:
            raw = single(key)
            if raw is None:
                out[key] = default
            elif raw not in values:
                errors[key] = ("rest_not_in_enum", f"{key} is not one of {', '.join(values)}.")
            else:
                out[key] = raw

        def id_list(key: str) -> None:
            raw = query.get(key)
            if raw is None:
                raw = query.get(f"{key}[]")
            if raw is None:
                indexed = [v for k, v in query.items() if re.fullmatch(rf"{key}\[\d+\]", k)]
                raw = indexed or None
            if raw is None:
                out[key] = []
                return
            values = raw if isinstance(raw, list) else [raw]
            ids = []
            for v in values:
                ids.extend(int(x) for x in re.split(r"[\s,]+", str(v)) if x.strip().isdigit())
            out[key] = ids

        integer("page", 1, 1, None)
        integer("per_page", 10, 1, 100)
        integer("offset", None, None, None)
        enum("order", "desc", ("asc", "desc"))
        enum("orderby", "date", _PRODUCT_ORDERBY if products else
             ("date", "id", "include", "title", "slug", "modified"))
        id_list("include")
        id_list("exclude")
        raw_gmt = single("dates_are_gmt")
        if raw_gmt is None or raw_gmt.lower() in ("", "0", "false"):
            out["dates_are_gmt"] = False
        elif raw_gmt.lower() in ("1", "true"):
            out["dates_are_gmt"] = True
        else:
            errors["dates_are_gmt"] = ("rest_invalid_type", "dates_are_gmt is not of type boolean.")
        for key in ("after", "before", "modified_after", "modified_before"):
            raw = single(key)
            if raw is None:
                continue
            local = self._wp_date_to_local(raw)
            if local is None:
                errors[key] = ("rest_invalid_date", "Invalid date.")
            else:
                out[key] = local
        if products:
            enum("status", "any", _PRODUCT_STATUSES)
            enum("type", "", ("", "simple", "grouped", "external", "variable"))
            enum("stock_status", "", ("", "instock", "outofstock", "onbackorder"))
            for key in ("sku", "search", "slug", "category", "tag", "featured", "on_sale"):
                if single(key) is not None:
                    out[key] = single(key)
        if errors:
            raise invalid_params(errors)
        return out

    def _wp_date_to_local(self, raw: str) -> Optional[str]:
        """WP_Date_Query::build_mysql_datetime: offsets → site wall-clock time; naive = site time."""
        m = _DATE_RE.match(raw.strip())
        if not m:
            return None
        y, mo, d, hh, mi, ss, _frac, tz = m.groups()
        try:
            dt = datetime(int(y), int(mo), int(d), int(hh), int(mi), int(ss))
        except ValueError:
            return None
        if tz:
            if tz in ("Z", "z"):
                offset = timedelta(0)
            else:
                sign = 1 if tz[0] == "+" else -1
                digits = tz[1:].replace(":", "")
                offset = sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:4] or 0))
            dt = dt - offset + self.utc_offset  # to UTC, then to the site's wall clock
        return wp_datetime(dt)

    @staticmethod
    def _filter_dates(items: list[dict], params: dict) -> list[dict]:
        suffix = "_gmt" if params.get("dates_are_gmt") else ""
        checks = []
        if params.get("after"):
            checks.append((f"date_created{suffix}", ">", params["after"]))
        if params.get("before"):
            checks.append((f"date_created{suffix}", "<", params["before"]))
        if params.get("modified_after"):
            checks.append((f"date_modified{suffix}", ">", params["modified_after"]))
        if params.get("modified_before"):
            checks.append((f"date_modified{suffix}", "<", params["modified_before"]))
        for column, op, value in checks:
            if op == ">":
                items = [i for i in items if (i.get(column) or "") > value]
            else:
                items = [i for i in items if (i.get(column) or "") < value]
        return items

    def _page(self, items: list, params: dict, query: dict, route: str, links: bool = True):
        total = len(items)
        per_page, page = params["per_page"], params["page"]
        start = params["offset"] if params.get("offset") is not None else (page - 1) * per_page
        data = [self._fields(i, query) for i in items[start:start + per_page]]
        return self._headers_for(data, total, params, query, route)

    def _headers_for(self, data: list, total: int, params: dict, query: dict, route: str):
        per_page, page = params["per_page"], params["page"]
        max_pages = int(math.ceil(total / per_page)) if per_page else 0
        headers = {"X-WP-Total": str(total), "X-WP-TotalPages": str(max_pages), "Allow": "GET, POST"}
        links = []
        if page > 1:
            links.append(f'<{self._page_url(route, query, min(page - 1, max_pages))}>; rel="prev"')
        if max_pages > page:
            links.append(f'<{self._page_url(route, query, page + 1)}>; rel="next"')
        if links:
            headers["Link"] = ", ".join(links)
        return 200, data, headers

    def _page_url(self, route: str, query: dict, page: int) -> str:
        # add_query_arg( $request->get_query_params(), rest_url(...) ) then add_query_arg('page', n):
        # values are NOT url-encoded again (spaces aside, which we keep legal).
        pairs: list[tuple[str, str]] = []
        seen_page = False
        for key, value in query.items():
            values = value if isinstance(value, list) else [value]
            if key == "page":
                pairs.append(("page", str(page)))
                seen_page = True
                continue
            for v in values:
                pairs.append((key, v))
        if not seen_page:
            pairs.append(("page", str(page)))
        text = "&".join(f"{k}={v}" for k, v in pairs).replace(" ", "%20")
        return f"{self.links_url}{route}?{text}"
