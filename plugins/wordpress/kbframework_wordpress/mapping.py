"""Per-post-type field mapping: a WordPress REST item → a DocumentDraft.

A mapping (see ``schema.PostTypeMapping``) says, for one post type, which fields are joined
into the normalized text, which fill document columns, which become metadata, and which
are ignored. It is merged over built-in defaults (``default_mapping``) unless
``replace_defaults`` is true.

Field paths are dot-separated keys of the REST item as ``/wp-json/wp/v2/<type>?_embed``
returns it; a number indexes a list. Virtual fields, computed from ``_embedded``:

``featured_image`` (alias ``_thumbnail``)   the featured image's full-size URL
``featured_image_alt``                       its alt text
``categories`` / ``tags``                     names of the item's categories / tags
``terms.<taxonomy>``                          names of the item's terms in any taxonomy
``author_name``                               the author's display name

A path spec may be a list: the first path with a non-empty value wins
(``["acf.event_date", "meta.event_date"]``).
"""
from __future__ import annotations

import fnmatch
import html
import re
from datetime import date, datetime, timezone
from typing import Any, Optional
from zoneinfo import ZoneInfo

from kbframework import html_to_text
from kbframework import DocumentDraft

EVENT_TYPES = ("event", "events", "tribe_events", "tribe_event", "ajde_events", "mec-events",
               "espresso_events", "em_event", "event_listing")
_MISSING = object()

# Common field names of event plugins and ACF setups, tried in order.
_EVENT_START = ["acf.event_date", "acf.start_date", "acf.event_start", "acf.date", "meta.event_date",
                "meta.event_start", "meta._EventStartDate", "meta.start_date"]
_EVENT_END = ["acf.event_end", "acf.end_date", "acf.event_end_date", "meta.event_end", "meta._EventEndDate",
              "meta.end_date"]
_VENUE = ["acf.venue_name", "acf.venue", "meta.venue_name", "meta.venue"]
_CITY = ["acf.city", "acf.venue_city", "meta.city", "meta.venue_city"]


def default_role(post_type: str) -> str:
    """Roles by post type: event/tribe_events → event, product → product, post/page/anything else → article."""
    if post_type in EVENT_TYPES or post_type.endswith("_event") or post_type.endswith("_events"):
        return "event"
    if post_type == "product":
        return "product"
    return "article"


def default_doc_type(post_type: str) -> str:
    return {"post": "wp_post", "page": "wp_page"}.get(post_type, post_type)


def default_mapping(post_type: str, role: str) -> dict:
    m = {
        "text": ["content.rendered"],
        "columns": {"title": "title.rendered", "source_url": "link", "primary_image_url": "featured_image",
                    "tags": "tags"},
        "metadata": {"categories": {"path": "categories", "type": "list"}},
    }
    if role == "event":
        m["columns"].update(event_start=list(_EVENT_START), event_end=list(_EVENT_END), venue=list(_VENUE),
                            city=list(_CITY))
        m["metadata"].update(ticket_url=["acf.ticket_url", "meta.ticket_url"],
                             price={"path": ["acf.price", "meta.price"], "type": "number"})
        m["text"] = ["content.rendered", {"column": "event_start", "label": "When"},
                     {"column": "venue", "label": "Venue"}, {"column": "city", "label": "City"}]
    return m


# ----------------------------------------------------------------------- mapping specs


def _paths(spec) -> list[str]:
    if spec is None:
        return []
    return [p.strip() for p in (spec if isinstance(spec, list) else [spec])]


def effective_mapping(post_type: str, user: Optional[dict]) -> dict:
    """The full mapping for one post type: defaults merged with the admin's mapping.

    Returns ``{"role", "type", "text": [item], "columns": {col: {"paths", "format"}},
    "metadata": {key: {"paths", "type"} | {"value"}}, "ignore": [glob]}``.
    """
    user = user or {}
    role = user.get("role") or default_role(post_type)
    base = {"text": [], "columns": {}, "metadata": {}} if user.get("replace_defaults") \
        else default_mapping(post_type, role)
    text = user["text"] if "text" in user else base["text"]
    columns = {**base["columns"], **(user.get("columns") or {})}
    metadata = {**base["metadata"], **(user.get("metadata") or {})}
    ignore = [g.strip() for g in user.get("ignore") or [] if g and g.strip()]

    def ignored(path: str) -> bool:
        return any(fnmatch.fnmatchcase(path, g) for g in ignore)

    out_text = []
    for item in text:
        if isinstance(item, dict) and "column" in item:
            out_text.append({"column": item["column"], "label": item.get("label")})
            continue
        spec = item.get("path") if isinstance(item, dict) else item
        label = item.get("label") if isinstance(item, dict) else None
        paths = [p for p in _paths(spec) if not ignored(p)]
        if paths:
            out_text.append({"paths": paths, "label": label})
    out_cols = {}
    for col, spec in columns.items():
        if spec is None:
            continue
        fmt = spec.get("format") if isinstance(spec, dict) else None
        paths = [p for p in _paths(spec.get("path") if isinstance(spec, dict) else spec) if not ignored(p)]
        if paths:
            out_cols[col] = {"paths": paths, "format": fmt}
    out_meta = {}
    for key, spec in metadata.items():
        if spec is None:
            continue
        if isinstance(spec, dict) and "value" in spec:
            out_meta[key] = {"value": spec["value"]}
            continue
        typ = (spec.get("type") if isinstance(spec, dict) else None) or "auto"
        paths = [p for p in _paths(spec.get("path") if isinstance(spec, dict) else spec) if not ignored(p)]
        if paths:
            out_meta[key] = {"paths": paths, "type": typ}
    return {"role": role, "type": user.get("type") or default_doc_type(post_type), "text": out_text,
            "columns": out_cols, "metadata": out_meta, "ignore": ignore}


# ------------------------------------------------------------------------ field access


def _embedded(item: dict, rel: str) -> list:
    emb = item.get("_embedded") or {}
    val = emb.get(rel)
    return val if isinstance(val, list) else []


def _featured(item: dict) -> Optional[dict]:
    for media in _embedded(item, "wp:featuredmedia"):
        if isinstance(media, dict) and media.get("source_url") and not media.get("code"):
            return media
    return None


def _terms(item: dict, taxonomy: str) -> list[str]:
    names = []
    for group in _embedded(item, "wp:term"):
        for term in group if isinstance(group, list) else []:
            if isinstance(term, dict) and term.get("taxonomy") == taxonomy and term.get("name"):
                name = html.unescape(str(term["name"])).strip()
                if name and name not in names:
                    names.append(name)
    return names


def _virtual(item: dict, path: str):
    if path in ("featured_image", "_thumbnail", "featured_image.url"):
        media = _featured(item)
        return media.get("source_url") if media else None
    if path == "featured_image_alt":
        media = _featured(item)
        return (media.get("alt_text") or None) if media else None
    if path == "categories":
        return _terms(item, "category")
    if path == "tags":
        return _terms(item, "post_tag")
    if path.startswith("terms."):
        return _terms(item, path[6:])
    if path == "author_name":
        for a in _embedded(item, "author"):
            if isinstance(a, dict) and a.get("name"):
                return a["name"]
        return None
    return _MISSING


def get_path(item: dict, path: str):
    """The value at ``path`` (``None`` when absent). ACF's empty ``[]`` counts as no fields.
    A path written ``name:rest`` is read by the ``kb_field_mappers`` reader ``name``."""
    if ":" in path:
        from kbframework import NO_READER, read_mapped_path

        v = read_mapped_path(item, path)
        if v is not NO_READER:
            return v
    v = _virtual(item, path)
    if v is not _MISSING:
        return v
    cur: Any = item
    for part in path.split("."):
        if isinstance(cur, dict):
            if part in cur:
                cur = cur[part]
            else:
                return None
        elif isinstance(cur, list) and part.lstrip("-").isdigit():
            idx = int(part)
            if -len(cur) <= idx < len(cur):
                cur = cur[idx]
            else:
                return None
        else:
            return None
    return cur


def _empty(v) -> bool:
    return v is None or v == "" or v == [] or v == {} or (isinstance(v, str) and not v.strip())


def first_value(item: dict, paths: list[str]):
    for p in paths:
        v = get_path(item, p)
        if not _empty(v):
            return v, p
    return None, None


def expand_wildcard(item: dict, path: str, ignore: list[str]) -> list[tuple[str, Any]]:
    """``acf.*`` → [(``acf.venue_name``, value), …] in the order the item lists them."""
    base = path[:-2]
    parent = get_path(item, base) if base else item
    if not isinstance(parent, dict):
        return []
    out = []
    for key, val in parent.items():
        full = f"{base}.{key}" if base else key
        if any(fnmatch.fnmatchcase(full, g) for g in ignore) or key.startswith("_"):
            continue
        if not _empty(val):
            out.append((full, val))
    return out


# -------------------------------------------------------------------------- conversions


def _plain(value) -> str:
    """One-line text of a scalar (HTML entities and tags removed)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return f"{value:g}" if isinstance(value, float) else str(value)
    s = str(value)
    if "<" in s or "&" in s:
        s = html_to_text(s)
    return " ".join(s.split())


def text_of(value) -> str:
    """Text of any field value: HTML → structured text; lists joined; objects as lines."""
    if _empty(value):
        return ""
    if isinstance(value, dict):
        if "rendered" in value:
            return text_of(value.get("rendered"))
        if "url" in value and ("filename" in value or "mime_type" in value):
            return ""  # an ACF file/image array
        lines = []
        for k, v in value.items():
            t = text_of(v)
            if t:
                lines.append(f"{_humanize(k)}: {t}" if "\n" not in t else f"{_humanize(k)}:\n{t}")
        return "\n".join(lines)
    if isinstance(value, list):
        parts = [text_of(v) for v in value]
        return ", ".join(p for p in parts if p)
    if isinstance(value, str):
        return html_to_text(value)
    return _plain(value)


def _humanize(key: str) -> str:
    k = re.sub(r"[_\-]+", " ", str(key)).strip()
    return k[:1].upper() + k[1:]


_DATE_FORMATS = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d",
                 "%Y%m%d", "%d/%m/%Y %H:%M", "%d/%m/%Y %H:%M:%S", "%d/%m/%Y", "%d.%m.%Y %H:%M", "%d.%m.%Y",
                 "%d/%m/%Y %I:%M %p", "%B %d, %Y %I:%M %p", "%B %d, %Y %H:%M", "%B %d, %Y", "%d %B %Y")


def parse_datetime(value, tz: str, fmt: Optional[str] = None) -> Optional[datetime]:
    """A field value as an aware datetime. Values without an offset are in the
    organization's time zone ``tz`` (WordPress and ACF store site-local times); numbers of
    10 or 13 digits are Unix timestamps; ``fmt`` (strftime) is tried first when given."""
    if _empty(value) or isinstance(value, bool):
        return None
    zone = ZoneInfo(tz or "UTC")
    if isinstance(value, dict):  # ACF date arrays / The Events Calendar objects
        for k in ("date", "value", "start_date", "utc"):
            if value.get(k):
                return parse_datetime(value[k], tz, fmt)
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=zone)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=zone)
    if isinstance(value, (int, float)):
        return _from_timestamp(value)
    s = str(value).strip()
    if fmt:
        try:
            dt = datetime.strptime(s, fmt)
            return dt if dt.tzinfo else dt.replace(tzinfo=zone)
        except ValueError:
            pass
    if re.fullmatch(r"\d{10}(\.\d+)?|\d{13}", s):
        return _from_timestamp(float(s))
    iso = s[:-1] + "+00:00" if s.endswith(("Z", "z")) else s
    try:
        dt = datetime.fromisoformat(iso)
        return dt if dt.tzinfo else dt.replace(tzinfo=zone)
    except ValueError:
        pass
    for f in _DATE_FORMATS:
        try:
            return datetime.strptime(s, f).replace(tzinfo=zone)
        except ValueError:
            continue
    return None


def _from_timestamp(v: float) -> Optional[datetime]:
    if v > 1e12:
        v = v / 1000.0
    try:
        return datetime.fromtimestamp(v, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None


def parse_gmt(value) -> Optional[datetime]:
    """WordPress ``*_gmt`` fields: UTC without an offset."""
    if not value or not isinstance(value, str):
        return None
    try:
        dt = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return dt.replace(tzinfo=timezone.utc) if dt.tzinfo is None else dt.astimezone(timezone.utc)


def to_number(value) -> Optional[float | int]:
    if isinstance(value, bool) or _empty(value):
        return None
    if isinstance(value, (int, float)):
        return value
    s = _plain(value).replace("\u00a0", " ")
    m = re.search(r"-?\d[\d\s.,']*", s)
    if not m:
        return None
    num = re.sub(r"[\s']", "", m.group(0)).rstrip(".,")
    if "," in num and "." in num:  # 1.234,50 or 1,234.50: the last separator is decimal
        if num.rfind(",") > num.rfind("."):
            num = num.replace(".", "").replace(",", ".")
        else:
            num = num.replace(",", "")
    elif "," in num:
        head, _, tail = num.rpartition(",")
        num = head.replace(",", "") + ("." + tail if len(tail) != 3 else tail)
    try:
        f = float(num)
    except ValueError:
        return None
    return int(f) if f.is_integer() else f


def _url(value) -> Optional[str]:
    if isinstance(value, dict):
        for k in ("url", "source_url", "src", "guid"):
            v = value.get(k)
            if isinstance(v, dict):
                v = v.get("rendered")
            if isinstance(v, str) and v:
                value = v
                break
        else:
            return None
    if isinstance(value, list):
        value = value[0] if value else None
    if not isinstance(value, str):
        return None
    v = html.unescape(value.strip())
    return v if v.startswith(("http://", "https://")) and len(v) <= 2000 else None


def _string_list(value) -> list[str]:
    if _empty(value):
        return []
    if isinstance(value, str):
        items = re.split(r"\s*[,;]\s*", value) if ("," in value or ";" in value) else [value]
    elif isinstance(value, list):
        items = [v.get("name") if isinstance(v, dict) else v for v in value]
    else:
        items = [value]
    out = []
    for v in items:
        t = _plain(v)
        if t and t not in out:
            out.append(t[:100])
    return out


def convert_meta(value, typ: str, tz: str):
    if typ == "raw":
        return value
    if typ == "number" or typ == "integer":
        n = to_number(value)
        return int(n) if (typ == "integer" and n is not None) else n
    if typ == "bool":
        if isinstance(value, str):
            return value.strip().lower() in ("1", "true", "yes", "on")
        return bool(value)
    if typ == "list":
        return _string_list(value)
    if typ == "date":
        dt = parse_datetime(value, tz)
        return dt.isoformat() if dt else None
    if typ == "text":
        return text_of(value) or None
    if typ == "string":
        return _plain(value) or None
    # auto: scalars as plain strings/numbers, lists of scalars as lists, objects as they are
    if isinstance(value, (int, float, bool)):
        return value
    if isinstance(value, str):
        return _plain(value) or None
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value):
        return [(_plain(v) if isinstance(v, str) else v) for v in value]
    return value


def convert_column(col: str, value, tz: str, fmt: Optional[str], item: dict):
    if col in ("event_start", "event_end", "expires_at"):
        return parse_datetime(value, tz, fmt)
    if col in ("primary_image_url", "source_url"):
        if isinstance(value, int) and not isinstance(value, bool):  # an attachment id (ACF image "ID")
            media = _featured(item)
            return media["source_url"] if media and media.get("id") == value else None
        return _url(value)
    if col == "tags":
        return _string_list(value)
    text = _plain(value)
    return text[:500] if text else None


def _format_when(dt: datetime, tz: str) -> str:
    local = dt.astimezone(ZoneInfo(tz or "UTC"))
    return local.strftime("%A %-d %B %Y, %H:%M")


# ------------------------------------------------------------------------------ draft


def is_published(item: dict) -> bool:
    """Only public content is served: status ``publish`` and not password-protected."""
    if item.get("status") != "publish":
        return False
    content = item.get("content")
    if isinstance(content, dict) and content.get("protected"):
        return False
    return True


def build_draft(item: dict, mapping: dict, tz: str) -> DocumentDraft:
    """Apply an ``effective_mapping`` to one REST item."""
    post_type = str(item.get("type") or "post")
    cols: dict[str, Any] = {}
    for col, spec in mapping["columns"].items():
        value, _path = first_value(item, spec["paths"])
        if value is not None:
            cols[col] = convert_column(col, value, tz, spec.get("format"), item)
    meta: dict[str, Any] = {"wp_id": item.get("id"), "wp_post_type": post_type}
    for key, spec in mapping["metadata"].items():
        if "value" in spec:
            meta[key] = spec["value"]
            continue
        value, _path = first_value(item, spec["paths"])
        if value is not None:
            converted = convert_meta(value, spec["type"], tz)
            if converted not in (None, "", []):
                meta[key] = converted

    parts: list[str] = []
    for t in mapping["text"]:
        label = t.get("label")
        if "column" in t:
            v = cols.get(t["column"])
            if isinstance(v, datetime):
                v = _format_when(v, tz)
            elif isinstance(v, list):
                v = ", ".join(v)
            pieces = [(label or _humanize(t["column"]), v)] if v else []
        elif len(t["paths"]) == 1 and t["paths"][0].endswith(".*"):
            pieces = [(_humanize(p.rsplit(".", 1)[-1]), v)
                      for p, v in expand_wildcard(item, t["paths"][0], mapping["ignore"])]
        else:
            v, _p = first_value(item, t["paths"])
            pieces = [(label, v)] if v is not None else []
        for lab, v in pieces:
            text = text_of(v)
            if not text:
                continue
            if lab:
                parts.append(f"{lab}: {text}" if "\n" not in text else f"## {lab}\n\n{text}")
            else:
                parts.append(text)

    title = cols.pop("title", None) or _plain(get_path(item, "title.rendered")) or item.get("slug") or \
        f"{post_type} {item.get('id')}"
    body = "\n\n".join(parts).strip()
    if not body:
        body = title  # an empty post still answers "is there a page called …"
    raw = get_path(item, "content.rendered")
    tags = cols.pop("tags", None) or []
    return DocumentDraft(
        title=title[:500], normalized_content=body, type=mapping["type"], document_role=mapping["role"],
        external_id=str(item.get("id")), raw_content=raw if isinstance(raw, str) else None,
        source_url=cols.get("source_url"), source_modified_at=parse_gmt(item.get("modified_gmt")),
        event_start=cols.get("event_start"), event_end=cols.get("event_end"), venue=cols.get("venue"),
        city=cols.get("city"), primary_image_url=cols.get("primary_image_url"), tags=tags,
        expires_at=cols.get("expires_at"), metadata=meta, published=is_published(item))


def field_paths(item: dict, prefix: str = "", depth: int = 0) -> list[str]:
    """Every leaf path of a sample item (for the admin's mapping editor)."""
    out: list[str] = []
    if depth > 4:
        return out
    for key, val in (item or {}).items():
        if key in ("_links", "_embedded"):
            continue
        path = f"{prefix}{key}"
        if isinstance(val, dict) and val:
            out.extend(field_paths(val, path + ".", depth + 1))
        else:
            out.append(path)
    return out
