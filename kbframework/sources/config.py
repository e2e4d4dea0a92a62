"""Creating and configuring sources: config validated by the connector's marshmallow schema,
secrets encrypted at rest and only ever shown back masked."""
from __future__ import annotations

import secrets as _secrets

from marshmallow import Schema, ValidationError, fields
from sqlalchemy import select

from kbframework.clock import iso
from kbframework.hooks import registry
from kbframework.orgs.accounts import as_uuid
from kbframework.errors import NotFound, ValidationFailed
from kbframework.models import Source
from kbframework.security import decrypt_json, encrypt_json, mask


def get_source(s, org_id, source_id) -> Source:
    src = s.scalar(select(Source).where(Source.id == as_uuid(source_id), Source.organization_id == as_uuid(org_id)))
    if src is None:
        raise NotFound("No such source in this organization.")
    return src


def describe_source_types() -> list[dict]:
    out = []
    for name, c in sorted(registry.source_types().items()):
        schema = c.config_schema() if c.config_schema else None
        flds = []
        for fname, f in (schema.fields.items() if schema else []):
            flds.append({"name": fname, "type": type(f).__name__, "required": f.required,
                         "secret": fname in c.secret_fields,
                         "default": None if f.load_default is fields.missing_ else _plain(f.load_default),
                         "help": (f.metadata or {}).get("description")})
        out.append({"name": name, "label": c.label or name, "fields": flds,
                    "supports_sync": c.supports_sync, "supports_webhooks": c.accepts_webhooks,
                    "edited_in_admin": c.edited_in_admin, "accepts_uploads": c.accepts_uploads,
                    "discovers_fields": c.discovers_fields,
                    # extra entry points a connector offers on the admin's source page
                    "links": [{"label": str(a["label"]), "url": str(a["url"])} for a in c.admin_links]})
    return out


def _plain(v):
    if callable(v):
        try:
            v = v()
        except TypeError:
            return None
    return v if isinstance(v, (str, int, float, bool, list, dict, type(None))) else str(v)


def validate_config(connector, config: dict, partial: bool = False) -> dict:
    """The connector's config, loaded by its schema; a connector that declares none takes no
    settings (an empty schema: any field sent is refused by name, with a 400, not a 500)."""
    schema = connector.config_schema or Schema
    try:
        return schema().load(config or {}, partial=partial)
    except ValidationError as exc:
        raise ValidationFailed("The source configuration is not valid.", details=exc.messages)


def _split_secrets(connector, cfg: dict) -> tuple[dict, dict]:
    secret_names = set(connector.secret_fields)
    plain = {k: v for k, v in cfg.items() if k not in secret_names}
    secret = {k: v for k, v in cfg.items() if k in secret_names and v not in (None, "")}
    return plain, secret


def _interval(value) -> int | None:
    """Minutes between scheduled reconciliations (None: never)."""
    if value in (None, "", 0):
        return None
    try:
        n = int(value) if isinstance(value, (int, str)) and not isinstance(value, bool) else None
    except ValueError:
        n = None
    if n is None or not 1 <= n <= 525_600:
        raise ValidationFailed("'sync_interval_minutes' must be a whole number of minutes (1 to 525,600) or empty.")
    return n


def create_source(s, org_id, data: dict) -> Source:
    type_ = data.get("type")
    name = data.get("name") or ""
    if not type_ or not isinstance(type_, str):
        raise ValidationFailed("Choose a source type.")
    if not isinstance(name, str) or len(name) > 200:
        raise ValidationFailed("The source name must be text of at most 200 characters.")
    name = name.strip()
    connector = registry.source_type(type_)
    if not name:
        raise ValidationFailed("Give the source a name.")
    if not isinstance(data.get("config") or {}, dict):
        raise ValidationFailed("'config' must be an object.")
    cfg = validate_config(connector, data.get("config") or {})
    plain, secret = _split_secrets(connector, cfg)
    if "webhook_secret" in connector.secret_fields and "webhook_secret" not in secret:
        secret["webhook_secret"] = _secrets.token_urlsafe(24)
    cfg_interval = plain.pop("sync_interval_minutes", None)  # a config key of some connectors
    interval = data.get("sync_interval_minutes") or cfg_interval
    src = Source(organization_id=as_uuid(org_id), type=type_, name=name, status="active",
                 config=_jsonable(plain), secrets=encrypt_json(secret) if secret else None,
                 sync_interval_minutes=_interval(interval))
    s.add(src)
    s.flush()
    return src


def update_source(s, org_id, source_id, data: dict) -> Source:
    """Name, status, interval and config; a changed field mapping clears the watermark, so the
    next sync re-fetches every item and re-derives its text."""
    src = get_source(s, org_id, source_id)
    connector = registry.source_type(src.type)
    if "name" in data:
        if not isinstance(data["name"], str) or not data["name"].strip() or len(data["name"]) > 200:
            raise ValidationFailed("The name must be text of 1 to 200 characters.")
        src.name = data["name"].strip()
    if "status" in data:
        if data["status"] not in ("active", "disabled"):
            raise ValidationFailed("Status must be 'active' or 'disabled'.")
        src.status = data["status"]
    if "sync_interval_minutes" in data:
        src.sync_interval_minutes = _interval(data["sync_interval_minutes"])
    if "config" in data:
        if not isinstance(data["config"] or {}, dict):
            raise ValidationFailed("'config' must be an object.")
        old_secret = decrypt_json(src.secrets)
        merged = {**(src.config or {}), **old_secret, **{k: v for k, v in (data["config"] or {}).items()
                                                         if v not in (None, "") or k not in old_secret}}
        cfg = validate_config(connector, merged)
        plain, secret = _split_secrets(connector, cfg)
        cfg_interval = plain.pop("sync_interval_minutes", None)
        if "sync_interval_minutes" in (data["config"] or {}) and "sync_interval_minutes" not in data:
            src.sync_interval_minutes = _interval(cfg_interval)
        secret = {**old_secret, **secret}
        old_mapping = (src.config or {}).get("field_mapping")
        src.config = _jsonable(plain)
        src.secrets = encrypt_json(secret) if secret else None
        if plain.get("field_mapping") != old_mapping:
            # the mapping decides the text: force a re-fetch on the next sync
            src.watermark = None
    return src


def _jsonable(d: dict) -> dict:
    import json

    return json.loads(json.dumps(d, default=str))


def register_webhooks(org_id, source_id, base_url: str) -> dict:
    """Ask the remote system to send its webhooks to us (connectors with
    ``register_webhooks``, e.g. WooCommerce with a Read/Write key). ``base_url`` is this
    platform's public address; returns the delivery URL and what the remote answered.
    ``org_id=None`` (the CLI) looks the source up without tenant scoping."""
    from urllib.parse import urlsplit

    from kbframework.db import session_scope
    from kbframework.sources.sync import source_config, sync_context

    base = (base_url or "").strip().rstrip("/")
    parts = urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValidationFailed("base_url must be this platform's public address, e.g. https://kb.example.com")
    with session_scope() as s:
        if org_id is None:
            src = s.get(Source, as_uuid(source_id))
            if src is None:
                raise NotFound("No such source.")
        else:
            src = get_source(s, org_id, source_id)
        connector = registry.source_type(src.type)
        if not connector.registers_webhooks:
            raise ValidationFailed(f"{src.type} sources cannot register webhooks on the remote side.")
        config, ctx = source_config(src), sync_context(s, src)
        delivery_url = f"{base}/api/webhooks/v1/{src.type}/{src.id}"
    # no transaction is held while the remote answers (it pings the delivery URL first)
    hooks = connector.register_webhooks(config, delivery_url, config.get("webhook_secret"), ctx)
    return {"source_id": str(source_id), "delivery_url": delivery_url, "webhooks": hooks}


def source_to_dict(src: Source, s=None) -> dict:
    """A source as the API and the admin show it: secrets masked; with a session, its
    document count too."""
    from sqlalchemy import func

    from kbframework.models import Document

    connector = registry.source_types().get(src.type)
    secrets = decrypt_json(src.secrets) if src.secrets else {}
    out = {"id": str(src.id), "name": src.name, "type": src.type, "status": src.status,
           "config": src.config or {}, "secrets": {k: mask(v) for k, v in secrets.items()},
           "sync_interval_minutes": src.sync_interval_minutes, "last_sync_at": iso(src.last_sync_at),
           "last_error": src.last_error, "last_webhook_at": iso(src.last_webhook_at),
           "watermark": iso(src.watermark), "installed": connector is not None,
           "created_at": iso(src.created_at)}
    if s is not None:
        out["document_count"] = s.scalar(select(func.count()).select_from(Document).where(
            Document.source_id == src.id, Document.status != "deleted"))
    return out


def sync_runs(s, src: Source, limit: int = 20) -> list[dict]:
    from kbframework.models import SyncRun

    runs = s.scalars(select(SyncRun).where(SyncRun.source_id == src.id)
                     .order_by(SyncRun.started_at.desc()).limit(limit)).all()
    return [{"id": str(r.id), "kind": r.kind, "status": r.status, "stats": r.stats, "error": r.error,
             "started_at": iso(r.started_at), "finished_at": iso(r.finished_at)} for r in runs]
