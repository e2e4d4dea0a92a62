"""WooCommerce product (REST API v3 JSON) → :class:`kbframework.types.DocumentDraft`.

Pure functions: no network, no database. The connector fetches a product (and, for a
variable product, its variations) and calls :func:`product_to_draft`.

What goes where
---------------
* ``normalized_content`` (embedded, so only stable, descriptive text):
  ``# Name``, the short description, the description (HTML → clean text), then
  ``Categories: …``, ``Tags: …``, one ``Attribute: option, option`` line per attribute
  sent to text, one ``Label: value`` line per meta/ACF field sent to text.
  Prices, sale state and stock are never in the text, so a price change does not
  re-embed anything.
* ``metadata``: ``sku``, ``price`` (float; for a variable product the lowest active
  variation price), ``regular_price``, ``sale_price``, ``on_sale``, ``currency``,
  ``price_min``/``price_max`` (every product: for a simple one both equal ``price``; for a
  variable one the range over its enabled variations, falling back to the parent's
  ``price``/``price_html`` when ``variations`` is ``None``), ``in_stock``,
  ``stock_status``, ``stock_quantity``, ``categories`` (names), ``category_slugs``,
  ``tags`` (names), ``attributes`` ({name: [options]} for attributes sent to metadata),
  ``product_type``, ``featured``, ``catalog_visibility``, ``status``, ``variations`` (a
  price/stock summary of each variation, variable products only), ``external_url``
  (external products), ``grouped_products`` (grouped), and every meta/ACF field sent
  to metadata under its own key (``meta:<key>`` if the key collides with one above).
* ``tags`` column: the product's tag names, then values of attributes / fields sent to
  ``tags`` (e.g. colours), de-duplicated case-insensitively.

Stock decision: ``in_stock`` follows WooCommerce's own ``WC_Product::is_in_stock()``:
everything except ``outofstock`` is in stock, so ``onbackorder`` counts as in stock (it
can be bought; ``stock_status`` keeps the nuance). A variable product is in stock when
any enabled variation is; disabled (``status != "publish"``) variations are ignored for
stock and prices.

``published`` is ``status == "publish"`` and ``catalog_visibility != "hidden"``.
Variations (``type == "variation"``, e.g. from a ``product.updated`` webhook fired for a
variation) are never documents of their own: the draft comes back unpublished, and the
caller should re-sync ``parent_id`` instead.

Mapping format (the admin edits it as JSON)
-------------------------------------------
::

    {
      "attributes": {"Color": "text+tags", "Size": "metadata", "Logo": "ignore"},
      "meta":       {"_warranty": "text", "return_policy_snippet": "text", "gtin": "metadata"},
      "acf":        {"material": "text", "venue_name": "column:venue"},
      "columns":    {"meta.venue": "venue", "acf.city": "city", "attribute.Brand": "tags"}
    }

Each target is ``text``, ``metadata``, ``tags``, ``ignore``, ``column:<name>`` or a
``+``-joined combination (``text+tags``, ``text+metadata``, ``text+metadata+tags``,
``metadata+column:city``...). Columns: ``primary_image_url``, ``venue``, ``city``,
``event_start``, ``event_end``, ``expires_at``, ``source_url``.

* ``attributes`` keys match the attribute name or its slug (``pa_color``),
  case-insensitively. Unmapped attributes that the shopper sees — ``visible`` ones and
  the ones used for variations, which the product form shows even when "Visible on the
  product page" is unticked — default to ``text+metadata``, and a colour attribute
  (``Color``, ``Colour``, ``pa_color``) to ``text+metadata+tags`` so that it filters;
  other unmapped attributes are ignored.
* ``meta`` keys are ``meta_data[].key``. Unmapped meta keys are ignored (keys starting
  with ``_`` are WordPress/plugin internals and are only used when mapped explicitly).
  A key present several times yields a list.
* ``acf`` keys are ACF field names, read from the product's ``acf`` object (ACF's REST
  output) or else from ``meta_data`` (ACF stores each field under its name).
* ``columns`` maps a source path to a target: ``meta.<key>``, ``acf.<name>``,
  ``attribute.<name>``, or a dotted path into the product JSON (``images.1.src``). The
  value is a column name (``"venue"``) or any target above.

Dates for ``event_start``/``event_end``/``expires_at`` accept ISO 8601, ACF's ``Ymd``
and ``Y-m-d H:i:s`` and Unix timestamps; values without an offset are taken as UTC.
"""
from __future__ import annotations

import hashlib
import html as html_lib
import json
import logging
import re
from datetime import datetime, timezone
from typing import Any, Optional

from kbframework import DocumentDraft

log = logging.getLogger(__name__)

try:  # the shared helper, when the host has it
    from kbframework import html_to_text as _shared_html_to_text
except ImportError:  # an older host without it
    _shared_html_to_text = None

NORMALIZER_VERSION = 2  # 2: an unmapped colour attribute is a tag too
DOCUMENT_TYPE = "woo_product"
DOCUMENT_ROLE = "product"

COLUMN_TARGETS = ("primary_image_url", "venue", "city", "event_start", "event_end",
                  "expires_at", "source_url")
_DATE_COLUMNS = ("event_start", "event_end", "expires_at")
_SIMPLE_TARGETS = ("text", "metadata", "tags")
_SECTIONS = ("attributes", "meta", "acf", "columns")

_CHEAP_FIELDS = ("price", "regular_price", "sale_price", "on_sale", "price_min", "price_max",
                 "in_stock", "stock_status", "stock_quantity", "variations")

_RESERVED_METADATA = frozenset({
    "sku", "price", "regular_price", "sale_price", "on_sale", "currency", "price_min",
    "price_max", "in_stock", "stock_status", "stock_quantity", "categories",
    "category_slugs", "tags", "attributes", "product_type", "featured",
    "catalog_visibility", "status", "variations", "external_url", "grouped_products",
    "parent_id",
})


def cheap_fields() -> tuple[str, ...]:
    """Metadata keys that may change without re-embedding (prices, sale and stock state;
    ``variations`` only summarises those per variation)."""
    return _CHEAP_FIELDS


# --------------------------------------------------------------------------- mapping

def parse_target(value: Any) -> dict:
    """``"text+tags"`` → ``{"text": True, "metadata": False, "tags": True, "columns": []}``."""
    out = {"text": False, "metadata": False, "tags": False, "columns": []}
    if value is None:
        raise ValueError("empty mapping target")
    text = str(value).strip()
    if text.lower() == "ignore" or text == "":
        return out
    for part in text.split("+"):
        part = part.strip()
        low = part.lower()
        if low in _SIMPLE_TARGETS:
            out[low] = True
        elif low.startswith("column:"):
            column = low[len("column:"):].strip()
            if column not in COLUMN_TARGETS:
                raise ValueError(f"unknown column {column!r} (one of {', '.join(COLUMN_TARGETS)})")
            if column not in out["columns"]:
                out["columns"].append(column)
        elif low == "ignore":
            raise ValueError("'ignore' cannot be combined with other targets")
        else:
            raise ValueError(f"unknown target {part!r} (text, metadata, tags, ignore, column:<name>)")
    return out


def _target_string(target: dict) -> str:
    parts = [t for t in _SIMPLE_TARGETS if target[t]] + [f"column:{c}" for c in target["columns"]]
    return "+".join(parts) or "ignore"


def normalize_mapping(mapping: Optional[dict]) -> dict:
    """Validate a mapping and return its canonical form (all sections, canonical targets).
    Raises ``ValueError`` on an invalid mapping."""
    if mapping is None:
        mapping = {}
    if isinstance(mapping, str):
        mapping = json.loads(mapping)
    if not isinstance(mapping, dict):
        raise ValueError("mapping must be a JSON object")
    unknown = set(mapping) - set(_SECTIONS)
    if unknown:
        raise ValueError(f"unknown mapping section(s): {', '.join(sorted(unknown))}")
    out: dict[str, dict[str, str]] = {}
    for section in _SECTIONS:
        entries = mapping.get(section) or {}
        if not isinstance(entries, dict):
            raise ValueError(f"mapping section {section!r} must be an object")
        canon = {}
        for key, value in entries.items():
            if not isinstance(key, str) or not key.strip():
                raise ValueError(f"empty key in mapping section {section!r}")
            if section == "columns" and isinstance(value, str) and value.strip().lower() in COLUMN_TARGETS:
                value = "column:" + value.strip().lower()
            try:
                canon[key.strip()] = _target_string(parse_target(value))
            except ValueError as exc:
                raise ValueError(f"{section}.{key}: {exc}") from None
        out[section] = dict(sorted(canon.items()))
    return out


def validate_mapping(mapping: Any) -> list[str]:
    """Human-readable problems with a mapping (empty list when it is valid)."""
    try:
        normalize_mapping(mapping)
    except (ValueError, TypeError) as exc:
        return [str(exc)]
    return []


def mapping_fingerprint(mapping: Optional[dict]) -> str:
    """A stable hash of the canonical mapping (key order, spacing and target spelling do
    not matter) and of ``NORMALIZER_VERSION``: when it changes, drafts must be rebuilt."""
    canon = normalize_mapping(mapping)
    text = json.dumps({"v": NORMALIZER_VERSION, "mapping": canon}, sort_keys=True,
                      separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


# --------------------------------------------------------------------------- text helpers

_SHORTCODE_RE = re.compile(
    r"\[/?(?:[a-z][a-z0-9]*_[a-z0-9_-]+|caption|gallery|embed|video|audio|playlist|products?|"
    r"add_to_cart(?:_url)?|button|row|column|section|tabs?|accordion|toggle|fusion_[a-z_]+)"
    r"(?:\s[^\]]*)?/?\]", re.I)
_BLOCK_TAGS = frozenset({
    "p", "div", "section", "article", "header", "footer", "aside", "main", "nav", "h1", "h2",
    "h3", "h4", "h5", "h6", "ul", "ol", "dl", "dt", "dd", "table", "thead", "tbody", "tr",
    "blockquote", "pre", "figure", "figcaption", "hr", "address", "details", "summary",
})
_DROP_TAGS = frozenset({"script", "style", "noscript", "template", "iframe", "svg", "head", "form"})


def _strip_shortcodes(text: str) -> str:
    return _SHORTCODE_RE.sub(" ", text)


def _clean_lines(text: str) -> str:
    lines = [re.sub(r"[ \t\r\f\v\u00a0\u200b]+", " ", line).strip() for line in text.split("\n")]
    text = "\n".join(lines)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _html_text(html: Optional[str]) -> str:
    """Minimal HTML → text with lxml: blocks become paragraphs, ``<li>`` become "- " lines,
    scripts/styles dropped, entities decoded, whitespace collapsed."""
    if not html or not str(html).strip():
        return ""
    html = str(html)
    if "<" not in html and "&" not in html:
        return _clean_lines(html)
    from lxml import etree
    from lxml import html as lxml_html

    try:
        root = lxml_html.fragment_fromstring(html, create_parent="div")
    except (etree.LxmlError, ValueError):  # markup lxml refuses: strip the tags by pattern
        text = re.sub(r"(?is)<(script|style)\b.*?</\1>", " ", html)
        text = re.sub(r"(?i)<br\s*/?>|</p>|</li>|</h\d>", "\n", text)
        return _clean_lines(html_lib.unescape(re.sub(r"<[^>]+>", " ", text)))

    out: list[str] = []

    def inline(text: Optional[str]) -> None:
        if text:
            out.append(re.sub(r"\s+", " ", text))

    def walk(el) -> None:
        tag = el.tag.lower() if isinstance(el.tag, str) else None
        if tag is None:  # comment / processing instruction
            inline(el.tail)
            return
        if tag in _DROP_TAGS:
            inline(el.tail)
            return
        if tag == "br":
            out.append("\n")
        elif tag in _BLOCK_TAGS:
            out.append("\n\n")
        elif tag == "li":
            out.append("\n- ")
        elif tag in ("td", "th"):
            out.append(" ")
        elif tag == "img" and el.get("alt"):
            inline(" " + el.get("alt") + " ")
        inline(el.text)
        for child in el:
            walk(child)
        if tag in _BLOCK_TAGS:
            out.append("\n\n")
        inline(el.tail)

    walk(root)
    return _clean_lines("".join(out))


def html_to_text(html: Optional[str]) -> str:
    """HTML → clean text: the host's ``kbframework.text.html.html_to_text`` when present,
    else :func:`_html_text`. Page-builder shortcodes (``[vc_row]``…) are removed first."""
    if not html:
        return ""
    html = _strip_shortcodes(str(html))
    if _shared_html_to_text is not None:
        try:
            text = _shared_html_to_text(html)
            if isinstance(text, str):
                return _clean_lines(text)
        except Exception:  # the host's helper failed on this markup: the plugin's own reads it
            log.warning("the host's html_to_text failed; using the connector's own reader", exc_info=True)
    return _html_text(html)


def _plain(value: Any) -> str:
    """Names in WordPress come HTML-escaped (``Black &amp; White``)."""
    return html_lib.unescape(str(value)).strip() if value is not None else ""


def _label(key: str) -> str:
    text = re.sub(r"[_\-]+", " ", key.lstrip("_")).strip()
    return text[:1].upper() + text[1:] if text else key


def _value_text(value: Any) -> str:
    """A meta/ACF value as one line of text."""
    if value is None or value == "" or value == [] or value == {}:
        return ""
    if isinstance(value, bool):
        return "Yes" if value else "No"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        text = html_to_text(value) if ("<" in value or "&" in value) else value
        return re.sub(r"\s*\n\s*", " ", text).strip()
    if isinstance(value, list):
        parts = [_value_text(v) for v in value]
        return ", ".join(p for p in parts if p)
    if isinstance(value, dict):
        for key in ("label", "name", "title", "value", "url", "src"):
            if key in value and not isinstance(value[key], (dict, list)):
                return _value_text(value[key])
        parts = [f"{_label(str(k))}: {_value_text(v)}" for k, v in value.items() if _value_text(v)]
        return "; ".join(parts)
    return str(value)


def _value_tags(value: Any) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, list):
        out: list[str] = []
        for v in value:
            out.extend(_value_tags(v))
        return out
    text = _value_text(value)
    return [text] if text else []


# --------------------------------------------------------------------------- value helpers

def _num(value: Any) -> Optional[float]:
    if value is None or value == "" or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def parse_gmt(value: Any) -> Optional[datetime]:
    """A WooCommerce GMT timestamp (or a datetime) as an aware UTC datetime; None if unreadable."""
    if not value:
        return None
    if isinstance(value, datetime):
        dt = value
    else:
        try:
            dt = datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
        except ValueError:
            return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc)


def _parse_date(value: Any) -> Optional[datetime]:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return datetime.fromtimestamp(float(value), tz=timezone.utc)
    text = str(value).strip()
    if re.fullmatch(r"\d{8}", text):  # ACF date picker: Ymd
        return datetime.strptime(text, "%Y%m%d").replace(tzinfo=timezone.utc)
    if re.fullmatch(r"\d{9,11}", text):
        return datetime.fromtimestamp(int(text), tz=timezone.utc)
    return parse_gmt(text.replace(" ", "T", 1) if re.match(r"\d{4}-\d{2}-\d{2} ", text) else text)


def _price_html_amounts(price_html: str) -> list[float]:
    """Amounts shown in ``price_html``, struck-through (``<del>``) and screen-reader
    copies left out. Handles ``1,234.50`` and ``1.234,50``."""
    if not price_html:
        return []
    text = re.sub(r"(?is)<del\b.*?</del>", " ", price_html)
    text = re.sub(r'(?is)<span[^>]*screen-reader-text[^>]*>.*?</span>', " ", text)
    text = html_lib.unescape(re.sub(r"<[^>]+>", " ", text))
    amounts = []
    for token in re.findall(r"\d[\d.,\u00a0\u202f' ]*", text):
        token = re.sub(r"[\u00a0\u202f' ]", "", token).rstrip(".,")
        if not token:
            continue
        if "," in token and "." in token:
            decimal = "," if token.rfind(",") > token.rfind(".") else "."
        elif "," in token or "." in token:
            sep = "," if "," in token else "."
            # one separator followed by exactly three digits is a thousands separator
            decimal = None if re.search(rf"\{sep}\d{{3}}$", token) else sep
        else:
            decimal = None
        thousands = {",": ".", ".": ","}.get(decimal or "", ".,")
        for sep in thousands:
            token = token.replace(sep, "")
        if decimal == ",":
            token = token.replace(",", ".")
        try:
            amounts.append(float(token))
        except ValueError:
            continue
    return amounts


def _meta_values(product: dict) -> dict[str, Any]:
    values: dict[str, list] = {}
    for item in product.get("meta_data") or []:
        if isinstance(item, dict) and "key" in item:
            values.setdefault(str(item["key"]), []).append(item.get("value"))
    return {k: v[0] if len(v) == 1 else v for k, v in values.items()}


def _acf_values(product: dict, meta: dict[str, Any]) -> dict[str, Any]:
    acf = product.get("acf")
    out = dict(meta)
    if isinstance(acf, dict):
        out.update(acf)
    return out


# colour is how shoppers narrow a catalogue ("any in blue?"), so an unmapped colour attribute
# is a filter as well; other shown attributes (sizes "S", "M", materials) stay text+metadata,
# since a one-letter label would turn ordinary words into filters
_COLOUR_ATTRIBUTES = {"color", "colour", "colors", "colours"}


def _default_attribute_target(attr: dict) -> dict:
    shown = attr.get("visible", True) or attr.get("variation", False)
    if not shown:
        return parse_target("ignore")
    names = {_attr_key(_plain(attr.get("name"))), _attr_key(attr.get("slug") or "")}
    return parse_target("text+metadata+tags" if names & _COLOUR_ATTRIBUTES else "text+metadata")


def _attr_key(name: str) -> str:
    key = (name or "").strip().lower()
    return key[3:] if key.startswith("pa_") else key


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", (text or "").lower()).strip("-")


def _lookup_path(product: dict, path: str) -> Any:
    current: Any = product
    for part in path.split("."):
        if isinstance(current, list):
            if not part.isdigit() or int(part) >= len(current):
                return None
            current = current[int(part)]
        elif isinstance(current, dict):
            if part not in current:
                return None
            current = current[part]
        else:
            return None
    return current


# --------------------------------------------------------------------------- the mapper

def product_to_draft(product: dict, variations: Optional[list[dict]], mapping: Optional[dict],
                     currency: str = "EUR") -> DocumentDraft:
    """Map one WooCommerce product (REST v3 JSON) and, for a variable product, its
    variations (``None`` when not fetched) to a :class:`DocumentDraft`. See the module
    docstring for the mapping format and for what goes into text, metadata and tags."""
    mapping = normalize_mapping(mapping)
    name = _plain(product.get("name")) or f"Product {product.get('id')}"
    product_type = product.get("type") or "simple"
    status = product.get("status") or "publish"
    visibility = product.get("catalog_visibility") or "visible"

    field_lines: list[str] = []
    metadata: dict[str, Any] = {}
    extra_meta: dict[str, Any] = {}
    tag_values: list[str] = [_plain(t.get("name")) for t in product.get("tags") or []
                             if isinstance(t, dict) and t.get("name")]
    columns: dict[str, Any] = {}

    def send(target: dict, label: str, value: Any, meta_key: Optional[str] = None) -> None:
        if target["text"]:
            line = _value_text(value)
            if line:
                field_lines.append(f"{label}: {line}")
        if target["metadata"] and meta_key is not None and value not in (None, "", [], {}):
            extra_meta[meta_key] = value
        if target["tags"]:
            tag_values.extend(_value_tags(value))
        for column in target["columns"]:
            if column not in columns and value not in (None, "", [], {}):
                columns[column] = value

    # ---- attributes
    attr_map = {_attr_key(k): parse_target(v) for k, v in mapping["attributes"].items()}
    attr_metadata: dict[str, list[str]] = {}
    attributes = [a for a in product.get("attributes") or [] if isinstance(a, dict)]
    attributes.sort(key=lambda a: a.get("position", 0) or 0)
    attr_options: dict[str, list[str]] = {}
    attr_lines: list[str] = []
    for attr in attributes:
        attr_name = _plain(attr.get("name"))
        options = attr.get("options")
        if options is None and "option" in attr:
            options = [attr["option"]]
        options = [_plain(o) for o in (options or []) if _plain(o)]
        if not attr_name or not options:
            continue
        attr_options[attr_name] = options
        target = attr_map.get(_attr_key(attr_name)) or attr_map.get(_attr_key(attr.get("slug") or "")) \
            or attr_map.get(_slug(attr_name))
        if target is None:
            target = _default_attribute_target(attr)
        if target["text"]:
            attr_lines.append(f"{attr_name}: {', '.join(options)}")
        if target["metadata"]:
            attr_metadata[attr_name] = options
        if target["tags"]:
            tag_values.extend(options)
        for column in target["columns"]:
            columns.setdefault(column, options[0] if len(options) == 1 else ", ".join(options))

    # ---- meta / ACF
    meta = _meta_values(product)
    acf = _acf_values(product, meta)
    for key, target_text in mapping["meta"].items():
        if key in meta:
            send(parse_target(target_text), _label(key), meta[key], key)
    for key, target_text in mapping["acf"].items():
        if key in acf:
            send(parse_target(target_text), _label(key), acf[key], key)
    for path, target_text in mapping["columns"].items():
        head, _, rest = path.partition(".")
        if head == "meta":
            value = meta.get(rest)
        elif head == "acf":
            value = acf.get(rest)
        elif head in ("attribute", "attributes"):
            value = next((opts for n, opts in attr_options.items()
                          if _attr_key(n) == _attr_key(rest) or _slug(n) == _slug(rest)), None)
            if isinstance(value, list) and len(value) == 1:
                value = value[0]
        else:
            value = _lookup_path(product, path)
        if value is not None:
            send(parse_target(target_text), _label(rest or head), value, rest or head)

    # ---- text
    short_text = html_to_text(product.get("short_description"))
    long_text = html_to_text(product.get("description"))
    parts = [f"# {name}"]
    squash = lambda t: re.sub(r"\W+", " ", t).strip().lower()  # noqa: E731
    if short_text and not (long_text and squash(short_text) in squash(long_text)):
        parts.append(short_text)
    if long_text:
        parts.append(long_text)
    facts: list[str] = []
    categories = [c for c in product.get("categories") or [] if isinstance(c, dict)]
    category_names = [_plain(c.get("name")) for c in categories if c.get("name")]
    if category_names:
        facts.append("Categories: " + ", ".join(category_names))
    tag_names = [_plain(t.get("name")) for t in product.get("tags") or [] if isinstance(t, dict) and t.get("name")]
    if tag_names:
        facts.append("Tags: " + ", ".join(tag_names))
    facts.extend(attr_lines)
    facts.extend(field_lines)
    if facts:
        parts.append("\n".join(facts))
    normalized_content = "\n\n".join(p for p in parts if p)

    # ---- prices and stock
    enabled = [v for v in (variations or []) if isinstance(v, dict)
               and (v.get("status") or "publish") == "publish"]
    price = _num(product.get("price"))
    regular = _num(product.get("regular_price"))
    sale = _num(product.get("sale_price"))
    on_sale = bool(product.get("on_sale"))
    stock_status = product.get("stock_status") or "instock"
    stock_quantity = product.get("stock_quantity")
    price_min = price_max = price
    variation_summary = None
    if product_type == "variable":
        if variations is not None:
            priced = [v for v in enabled if _num(v.get("price")) is not None]
            prices = [_num(v.get("price")) for v in priced]
            if prices:
                price_min, price_max = min(prices), max(prices)
                price = price_min
                regulars = [_num(v.get("regular_price")) for v in priced if _num(v.get("regular_price")) is not None]
                regular = min(regulars) if regulars else None
                sales = [_num(v.get("sale_price")) for v in priced
                         if v.get("on_sale") and _num(v.get("sale_price")) is not None]
                sale = min(sales) if sales else None
                on_sale = any(bool(v.get("on_sale")) for v in priced)
            else:
                price_min = price_max = price
            statuses = {v.get("stock_status") or "instock" for v in enabled}
            if "instock" in statuses:
                stock_status = "instock"
            elif "onbackorder" in statuses:
                stock_status = "onbackorder"
            elif enabled:
                stock_status = "outofstock"
            if stock_quantity is None:
                quantities = [v.get("stock_quantity") for v in enabled if isinstance(v.get("stock_quantity"), int)]
                stock_quantity = sum(quantities) if quantities else None
            variation_summary = []
            for v in variations:
                if not isinstance(v, dict):
                    continue
                v_status = v.get("stock_status") or "instock"
                variation_summary.append({
                    "id": v.get("id"),
                    "sku": v.get("sku") or "",
                    "attributes": {_plain(a.get("name")): _plain(a.get("option"))
                                   for a in v.get("attributes") or [] if isinstance(a, dict)},
                    "price": _num(v.get("price")),
                    "regular_price": _num(v.get("regular_price")),
                    "sale_price": _num(v.get("sale_price")) if v.get("on_sale") else None,
                    "on_sale": bool(v.get("on_sale")),
                    "stock_status": v_status,
                    "in_stock": v_status != "outofstock" and (v.get("status") or "publish") == "publish",
                    "stock_quantity": v.get("stock_quantity"),
                    "enabled": (v.get("status") or "publish") == "publish",
                })
        else:
            amounts = _price_html_amounts(product.get("price_html") or "")
            if amounts:
                price_min = min(amounts + ([price] if price is not None else []))
                price_max = max(amounts)
            if price is None:
                price = price_min
    elif product_type == "grouped":
        amounts = _price_html_amounts(product.get("price_html") or "")
        if amounts:
            price_min, price_max = min(amounts), max(amounts)
            price = price if price is not None else price_min
    if product_type != "variable" and on_sale and sale is None and regular is not None:
        sale = price

    metadata.update({
        "sku": product.get("sku") or "",
        "price": price,
        "regular_price": regular,
        "sale_price": sale,
        "on_sale": on_sale,
        "currency": currency,
        "price_min": price_min,
        "price_max": price_max,
        "in_stock": stock_status != "outofstock",
        "stock_status": stock_status,
        "stock_quantity": stock_quantity,
        "categories": category_names,
        "category_slugs": [c.get("slug") for c in categories if c.get("slug")],
        "tags": tag_names,
        "attributes": attr_metadata,
        "product_type": product_type,
        "featured": bool(product.get("featured")),
        "catalog_visibility": visibility,
        "status": status,
    })
    if variation_summary is not None:
        metadata["variations"] = variation_summary
    if product_type == "external" and product.get("external_url"):
        metadata["external_url"] = product["external_url"]
    if product_type == "grouped":
        metadata["grouped_products"] = list(product.get("grouped_products") or [])
    if product.get("parent_id"):
        metadata["parent_id"] = product["parent_id"]
    for key, value in extra_meta.items():
        metadata[f"meta:{key}" if key in _RESERVED_METADATA else key] = value

    # ---- tags column (dedupe, keep order)
    tags: list[str] = []
    seen: set[str] = set()
    for tag in tag_values:
        tag = _plain(tag)
        if tag and tag.lower() not in seen:
            seen.add(tag.lower())
            tags.append(tag)

    # ---- columns
    images = [i for i in product.get("images") or [] if isinstance(i, dict) and i.get("src")]
    primary_image = images[0]["src"] if images else None
    if not primary_image and isinstance(product.get("image"), dict):
        primary_image = product["image"].get("src")  # a variation payload
    draft_columns: dict[str, Any] = {}
    for column, value in columns.items():
        if column in _DATE_COLUMNS:
            parsed = _parse_date(value[0] if isinstance(value, list) and value else value)
            if parsed is not None:
                draft_columns[column] = parsed
        else:
            if isinstance(value, dict):
                value = value.get("url") or value.get("src") or _value_text(value)
            elif isinstance(value, list):
                value = _value_text(value)
            if value not in (None, ""):
                draft_columns[column] = _plain(value) if column in ("venue", "city") else str(value)

    modified = parse_gmt(product.get("date_modified_gmt")) or parse_gmt(product.get("date_modified"))
    for v in enabled:
        v_modified = parse_gmt(v.get("date_modified_gmt"))
        if v_modified and (modified is None or v_modified > modified):
            modified = v_modified

    published = status == "publish" and visibility != "hidden" and product_type != "variation"

    return DocumentDraft(
        title=name,
        normalized_content=normalized_content,
        type=DOCUMENT_TYPE,
        document_role=DOCUMENT_ROLE,
        external_id=str(product.get("id")),
        raw_content=product.get("description") or None,
        source_url=draft_columns.get("source_url") or product.get("permalink") or None,
        source_modified_at=modified,
        event_start=draft_columns.get("event_start"),
        event_end=draft_columns.get("event_end"),
        venue=draft_columns.get("venue"),
        city=draft_columns.get("city"),
        primary_image_url=draft_columns.get("primary_image_url") or primary_image,
        tags=tags,
        expires_at=draft_columns.get("expires_at"),
        metadata=metadata,
        published=published,
    )
