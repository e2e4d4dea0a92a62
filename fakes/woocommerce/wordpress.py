"""How WordPress and WooCommerce write things: the REST namespace, PHP's ``json_encode``,
``wpautop`` paragraphs, slugs, site-local dates and prices as entered."""
from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from typing import Any, Optional

WC_NAMESPACE = "/wp-json/wc/v3"

_PHP_DEL_RE = re.compile(r"(?<!\\)((?:\\\\)*)\\u007f")


def php_json_encode(obj: Any) -> str:
    """Encode like PHP's ``json_encode($x)`` with default flags (what WordPress sends)."""
    s = json.dumps(obj, ensure_ascii=True, separators=(",", ":"))
    s = s.replace("/", "\\/")  # '/' only ever occurs inside strings in JSON text
    if "\\u007f" in s:  # PHP leaves DEL unescaped
        s = _PHP_DEL_RE.sub(lambda m: m.group(1) + "\x7f", s)
    return s


def wpautop(text: str) -> str:
    """A small ``wpautop``: blank-line separated paragraphs → ``<p>…</p>\\n``."""
    text = (text or "").replace("\r\n", "\n").strip()
    if not text:
        return ""
    out = []
    for para in re.split(r"\n\s*\n", text):
        para = para.strip()
        if not para:
            continue
        if re.match(r"(?is)^<(p|div|ul|ol|table|h[1-6]|blockquote|pre|figure)\b", para):
            out.append(para + "\n")
        else:
            out.append("<p>" + para.replace("\n", "<br />\n") + "</p>\n")
    return "".join(out)


def slugify(value: str) -> str:
    value = re.sub(r"[^\w\s-]", "", (value or "").lower(), flags=re.UNICODE)
    return re.sub(r"[\s_-]+", "-", value).strip("-") or "item"


def wp_datetime(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%S")


def parse_gmt(value: Optional[str]) -> Optional[datetime]:
    if not value:
        return None
    dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc)


def number(value: Any) -> Optional[float]:
    if value in (None, ""):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def price_str(value: Any) -> str:
    """WooCommerce keeps prices as entered (``"45"``, ``"11.05"``)."""
    if value in (None, ""):
        return ""
    if isinstance(value, float):
        text = repr(value)
        return text[:-2] if text.endswith(".0") else text
    text = str(value).strip()
    return "0" + text if text.startswith(".") else text


def decimal_str(value: Any) -> str:
    text = "" if value in (None, "") else str(value).strip()
    return "0" + text if text.startswith(".") else text
