"""The WordPress source's configuration, validated with marshmallow.

Everything an admin sends is checked here: a bad field path, an unknown column, a mapping
for a post type that is not selected all come back as one clear message per field. The
validated values are stored as written (the compact forms stay compact); ``mapping.py``
turns them into their full form when a sync runs. See ``/work/notes/readme-wordpress.md``
(README "WordPress source") for the format with an example for an events site.
"""
from __future__ import annotations

import re

from marshmallow import Schema, ValidationError, fields, validate, validates, validates_schema

from kbframework import DOCUMENT_ROLES

# A field path: dot-separated keys of the REST item (``title.rendered``, ``acf.event_date``,
# ``_embedded.wp:featuredmedia.0.source_url``); the last key may be ``*`` in a text item
# (``acf.*``: every ACF field, one "Label: value" line each).
PATH_RE = re.compile(r"^[A-Za-z0-9_:@\-]+(?:\.(?:[A-Za-z0-9_:@\-]+|\*))*$")
SLUG_RE = re.compile(r"^[a-z0-9_-]{1,40}$")

#: document columns a field may be mapped to
COLUMNS = ("title", "event_start", "event_end", "venue", "city", "primary_image_url", "source_url",
           "expires_at", "tags")
DATE_COLUMNS = ("event_start", "event_end", "expires_at")
#: conversions for metadata values
META_TYPES = ("auto", "string", "text", "number", "integer", "bool", "list", "date", "raw")
METADATA_KEY_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,59}$")
RESERVED_METADATA = ("last_error", "last_error_at", "unpublished_at")


def _check_path(value, where: str, *, wildcard: bool = False) -> None:
    """A path spec is a path string or a non-empty list of them (tried in order)."""
    paths = value if isinstance(value, list) else [value]
    if not paths:
        raise ValidationError(f"{where}: give at least one field path.")
    for p in paths:
        if not isinstance(p, str) or not PATH_RE.match(p.strip()):
            raise ValidationError(f"{where}: {p!r} is not a field path (use dots: 'acf.event_date', "
                                  "'title.rendered', 'meta.price').")
        if "*" in p and not wildcard:
            raise ValidationError(f"{where}: a wildcard ('{p}') is only allowed in 'text'.")
        if "*" in p and not p.endswith(".*"):
            raise ValidationError(f"{where}: '*' may only be the last part of a path ('acf.*').")


class TextItems(fields.Field):
    """``text``: list of ``"path"`` | ``["path", "fallback"]`` | ``{"path": …, "label": "Venue"}``
    | ``{"column": "event_start", "label": "When"}``."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, list):
            raise ValidationError("'text' must be a list of field paths.")
        if len(value) > 50:
            raise ValidationError("'text' may list at most 50 fields.")
        for i, item in enumerate(value):
            where = f"text[{i}]"
            if isinstance(item, (str, list)):
                _check_path(item, where, wildcard=True)
            elif isinstance(item, dict):
                unknown = set(item) - {"path", "label", "column"}
                if unknown:
                    raise ValidationError(f"{where}: unknown keys {sorted(unknown)} "
                                          "(allowed: path, label, column).")
                if ("path" in item) == ("column" in item):
                    raise ValidationError(f"{where}: give either 'path' or 'column'.")
                if "path" in item:
                    _check_path(item["path"], where, wildcard=True)
                elif item["column"] not in COLUMNS:
                    raise ValidationError(f"{where}: unknown column {item['column']!r} "
                                          f"(one of {', '.join(COLUMNS)}).")
                label = item.get("label")
                if label is not None and (not isinstance(label, str) or len(label) > 80):
                    raise ValidationError(f"{where}: 'label' must be a short string.")
            else:
                raise ValidationError(f"{where}: expected a field path or an object.")
        return value


class ColumnMap(fields.Field):
    """``columns``: ``{"event_start": "acf.event_date" | [...] | {"path": …, "format": "%d/%m/%Y"} | null}``."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, dict):
            raise ValidationError("'columns' must be an object: {column: field path}.")
        for col, spec in value.items():
            where = f"columns.{col}"
            if col not in COLUMNS:
                raise ValidationError(f"{where}: unknown column (one of {', '.join(COLUMNS)}).")
            if spec is None:
                continue  # removes a default mapping
            if isinstance(spec, dict):
                unknown = set(spec) - {"path", "format"}
                if unknown or "path" not in spec:
                    raise ValidationError(f"{where}: use {{\"path\": …, \"format\": …}}.")
                _check_path(spec["path"], where)
                fmt = spec.get("format")
                if fmt is not None:
                    if col not in DATE_COLUMNS:
                        raise ValidationError(f"{where}: 'format' only applies to date columns.")
                    if not isinstance(fmt, str) or "%" not in fmt:
                        raise ValidationError(f"{where}: 'format' is a strftime pattern like '%d/%m/%Y %H:%M'.")
            else:
                _check_path(spec, where)
        return value


class MetadataMap(fields.Field):
    """``metadata``: ``{"ticket_url": "acf.ticket_url", "price": {"path": "acf.price", "type": "number"},
    "currency": {"value": "EUR"}, "old_key": null}``."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, dict):
            raise ValidationError("'metadata' must be an object: {key: field path}.")
        if len(value) > 60:
            raise ValidationError("'metadata' may map at most 60 keys.")
        for key, spec in value.items():
            where = f"metadata.{key}"
            if not METADATA_KEY_RE.match(key) or key in RESERVED_METADATA:
                raise ValidationError(f"{where}: keys are letters, digits and '_' (not {RESERVED_METADATA}).")
            if spec is None:
                continue
            if isinstance(spec, dict):
                if "value" in spec:
                    if set(spec) != {"value"}:
                        raise ValidationError(f"{where}: a constant is {{\"value\": …}} alone.")
                    if not isinstance(spec["value"], (str, int, float, bool, list)):
                        raise ValidationError(f"{where}: a constant must be a string, number, bool or list.")
                    continue
                unknown = set(spec) - {"path", "type"}
                if unknown or "path" not in spec:
                    raise ValidationError(f"{where}: use {{\"path\": …, \"type\": …}} or {{\"value\": …}}.")
                _check_path(spec["path"], where)
                if spec.get("type", "auto") not in META_TYPES:
                    raise ValidationError(f"{where}: 'type' is one of {', '.join(META_TYPES)}.")
            else:
                _check_path(spec, where)
        return value


class PostTypeMapping(Schema):
    """How one post type becomes documents (merged over the built-in defaults)."""

    role = fields.String(validate=validate.OneOf(DOCUMENT_ROLES),
                         metadata={"description": "document_role; default: event for event-like types, "
                                                  "product for product, else article"})
    type = fields.String(validate=validate.Regexp(r"^[a-z0-9_-]{1,40}$"),
                         metadata={"description": "documents.type; default wp_post / wp_page / the slug"})
    text = TextItems(metadata={"description": "fields joined into the normalized text, in order"})
    columns = ColumnMap(metadata={"description": "document columns filled from fields"})
    metadata = MetadataMap(metadata={"description": "metadata keys filled from fields"})
    ignore = fields.List(fields.String(), load_default=list,
                         metadata={"description": "paths (globs) never used: 'acf.internal_*'"})
    replace_defaults = fields.Boolean(load_default=False,
                                      metadata={"description": "true: use only this mapping, no defaults"})

    @validates("ignore")
    def _ignore(self, value, **_):
        for p in value:
            if not re.match(r"^[A-Za-z0-9_:@\-.*?\[\]]+$", p):
                raise ValidationError(f"{p!r} is not a field path or glob.")


class MappingField(fields.Field):
    """``field_mapping``: ``{post_type: PostTypeMapping}``."""

    def _deserialize(self, value, attr, data, **kwargs):
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise ValidationError("'field_mapping' must be an object keyed by post type.")
        out, errors = {}, {}
        for slug, m in value.items():
            if not SLUG_RE.match(str(slug)):
                errors[slug] = ["not a post type slug"]
                continue
            if not isinstance(m, dict):
                errors[slug] = ["must be an object (role, text, columns, metadata, ignore)"]
                continue
            try:
                out[slug] = PostTypeMapping().load(m)
            except ValidationError as exc:
                errors[slug] = exc.messages
        if errors:
            raise ValidationError(errors)
        return out


class WordPressConfig(Schema):
    base_url = fields.Url(required=True, schemes={"http", "https"}, require_tld=False,
                          metadata={"description": "The site's address, e.g. https://example.com"})
    auth_type = fields.String(load_default=None, allow_none=True,
                              validate=validate.OneOf(("none", "application_password", "bearer")),
                              metadata={"description": "none | application_password | bearer "
                                                       "(default: application_password when a user is set)"})
    username = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=200))
    app_password = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=200),
                                 metadata={"description": "WordPress application password (stored encrypted)"})
    bearer_token = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=4000),
                                 metadata={"description": "Bearer token, e.g. JWT plugin (stored encrypted)"})
    webhook_secret = fields.String(load_default=None, allow_none=True, validate=validate.Length(min=8, max=200),
                                   metadata={"description": "Secret the webhook sender proves (generated if empty)"})
    post_types = fields.List(fields.String(validate=validate.Regexp(SLUG_RE, error="not a post type slug")),
                             load_default=lambda: ["post", "page"], validate=validate.Length(min=1, max=30),
                             metadata={"description": "post type slugs: post, page, event, tribe_events…"})
    field_mapping = MappingField(load_default=dict,
                                 metadata={"description": "per post type: role, text, columns, metadata, ignore"})
    per_page = fields.Integer(load_default=100, validate=validate.Range(1, 100))
    concurrency = fields.Integer(load_default=2, validate=validate.Range(1, 8),
                                 metadata={"description": "parallel page requests during a sync"})
    timeout_seconds = fields.Integer(load_default=30, validate=validate.Range(2, 300))
    max_items = fields.Integer(load_default=50000, validate=validate.Range(1, 1_000_000),
                               metadata={"description": "safety cap per post type and sync"})
    sync_interval_minutes = fields.Integer(load_default=None, allow_none=True, validate=validate.Range(5, 10080))
    companion = fields.Dict(load_default=None, allow_none=True,
                            metadata={"description": "set by the kbframework Connect plugin (site, key, "
                                                     "connection time); not edited by hand"})

    @validates_schema
    def _consistent(self, data, **_):
        types = data.get("post_types") or []
        if len(set(types)) != len(types):
            raise ValidationError("A post type is listed twice.", "post_types")
        extra = sorted(set(data.get("field_mapping") or {}) - set(types))
        if extra:
            raise ValidationError(f"Mapping for {', '.join(extra)}, which is not among the selected "
                                  "post types.", "field_mapping")
        auth = effective_auth(data)
        if auth == "application_password" and not (data.get("username") and data.get("app_password")):
            raise ValidationError("An application password needs both 'username' and 'app_password'.",
                                  "app_password")
        if auth == "bearer" and not data.get("bearer_token"):
            raise ValidationError("Bearer authentication needs 'bearer_token'.", "bearer_token")


def effective_auth(config: dict) -> str:
    auth = config.get("auth_type")
    if auth:
        return auth
    if config.get("username") and config.get("app_password"):
        return "application_password"
    if config.get("bearer_token"):
        return "bearer"
    return "none"
