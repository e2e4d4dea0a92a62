"""The ``wordpress`` source type: posts, pages and custom post types over the REST API.

Sync (driven by ``kbframework.sources.sync.run_sync``):

* full: every selected post type, ``status=publish``, ``_embed`` (featured image, terms),
  paged by ``X-WP-TotalPages``; whatever the site no longer returns (deleted, trashed,
  unpublished, made private) is purged by the host's reconciliation.
* incremental: the same with ``modified_after`` = the watermark (the newest
  ``modified_gmt`` seen) minus one second; items seen again are "stale" and cost nothing.
* one item (webhook): ``/wp/v2/<rest_base>/<id>`` for each selected type until one
  answers; not found or not public → the host purges the document.

``external_id`` is the post id (unique across post types in one WordPress site).
``source_modified_at`` is ``modified_gmt``. Text comes from the per-type field mapping
(``mapping.py``); HTML becomes structured text with ``kbframework.text.html.html_to_text``.
"""
from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone
from typing import Iterator, Optional

from kbframework import KBError
from kbframework import DocumentDraft, RawRecord, SourceConnector, SyncContext
from kbframework_wordpress import webhook as wh
from kbframework_wordpress.client import WPClient
from kbframework_wordpress.mapping import build_draft, effective_mapping, parse_gmt
from kbframework_wordpress.schema import WordPressConfig


class UnknownPostType(KBError):
    status = 400
    code = "unknown_post_type"


#: the admin's "Insert example" (an events site: CPT ``event`` with ACF fields)
MAPPING_EXAMPLE = {
    "event": {
        "role": "event",
        "text": ["content.rendered", {"path": "acf.genre", "label": "Genre"},
                 {"column": "event_start", "label": "When"}, {"column": "venue", "label": "Venue"},
                 {"column": "city", "label": "City"}],
        "columns": {"event_start": "acf.event_date", "event_end": "acf.event_end", "venue": "acf.venue_name",
                    "city": "acf.city", "primary_image_url": "featured_image"},
        "metadata": {"ticket_url": "acf.ticket_url", "price": {"path": "acf.price", "type": "number"},
                     "currency": {"value": "EUR"}, "genre": "acf.genre"},
        "ignore": ["meta.*"],
    },
    "post": {"text": ["content.rendered", {"path": "acf.subtitle", "label": "Subtitle"}]},
    "page": {"role": "support"},
}


class WordPressConnector(SourceConnector):
    name = "wordpress"
    label = "WordPress (REST API)"
    config_schema = WordPressConfig
    secret_fields = ("app_password", "bearer_token", "webhook_secret")
    supports_sync = True
    mapping_help = ("One entry per post type selected above: role, type, text (field paths in order, e.g. "
                    "title.rendered, acf.*), columns (event_start, venue, city…), metadata, ignore.")
    mapping_example = MAPPING_EXAMPLE
    discovers_fields = True
    accepts_webhooks = True
    #: links the admin's source page shows on this type's card (the host renders them as given)
    admin_links = ({"label": "Connect a WordPress site", "url": "/admin/wordpress/connect"},)

    # ------------------------------------------------------------------ helpers

    def client(self, config: dict, ctx: SyncContext) -> WPClient:
        return WPClient(config, allow_private=ctx.allow_private_network, log=ctx.log)

    def _types(self, client: WPClient, config: dict) -> list[dict]:
        available = client.types()
        wanted = list(config.get("post_types") or ["post", "page"])
        missing = [t for t in wanted if t not in available]
        if missing:
            shown = ", ".join(sorted(s for s, t in available.items() if t.get("viewable") is not False
                                     and not s.startswith("wp_") and s not in ("attachment", "nav_menu_item")))
            raise UnknownPostType(f"Post type {', '.join(missing)} is not available in the REST API of "
                                  f"{client.base} (available: {shown}). It must be registered with "
                                  "show_in_rest => true.")
        return [available[t] for t in wanted]

    def _records(self, config: dict, ctx: SyncContext, params: dict) -> Iterator[RawRecord]:
        client = self.client(config, ctx)
        try:
            client.check_credentials()
            for info in self._types(client, config):
                n = 0
                for item in client.collection(info, params, per_page=int(config.get("per_page") or 100),
                                              concurrency=int(config.get("concurrency") or 2),
                                              max_items=int(config.get("max_items") or 50000)):
                    rec = self._record(item)
                    if rec is not None:
                        n += 1
                        yield rec
                ctx.log(f"{info['slug']}: {n} items")
        finally:
            client.close()

    @staticmethod
    def _record(item: dict) -> Optional[RawRecord]:
        if not isinstance(item, dict) or item.get("id") is None:
            return None
        return RawRecord(external_id=str(item["id"]), payload=item, kind=str(item.get("type") or "post"),
                         source_modified_at=parse_gmt(item.get("modified_gmt")), url=item.get("link"))

    # ------------------------------------------------------------------ protocol

    def fetch_all(self, config: dict, ctx: SyncContext) -> Iterator[RawRecord]:
        return self._records(config, ctx, {})

    def fetch_changed(self, config: dict, since: datetime, ctx: SyncContext) -> Iterator[RawRecord]:
        if since is None:
            return self.fetch_all(config, ctx)
        if since.tzinfo is None:
            since = since.replace(tzinfo=timezone.utc)
        after = (since.astimezone(timezone.utc) - timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        return self._records(config, ctx, {"modified_after": after})

    def fetch_one(self, config: dict, external_id: str, ctx: SyncContext) -> Optional[RawRecord]:
        post_id = str(external_id).strip()
        if not post_id.isdigit():
            return None
        client = self.client(config, ctx)
        try:
            client.check_credentials()
            for info in self._types(client, config):
                status, item = client.item(info, post_id)
                if status == 200 and item is not None:
                    return self._record(item)
                if status in (401, 403):
                    return None  # exists, but not public: purge
            return None
        finally:
            client.close()

    def normalize(self, record: RawRecord, config: dict, ctx: SyncContext) -> DocumentDraft:
        item = record.payload
        post_type = str(item.get("type") or record.kind or "post")
        mapping = effective_mapping(post_type, (config.get("field_mapping") or {}).get(post_type))
        draft = build_draft(item, mapping, ctx.timezone or "UTC")
        if not draft.published:
            # Only a re-read of one item (a webhook or notice) returns a non-public post, and it
            # is the site's state now. WordPress keeps whole seconds: a trash or unpublish in the
            # same second as the last edit carries the same time and would be ignored as stale.
            draft = dataclasses.replace(draft, source_modified_at=None)
        return draft

    def handle_webhook(self, headers: dict, raw_body: bytes, secrets: dict) -> dict:
        return wh.handle(headers, raw_body, secrets)

    # ------------------------------------------------------------------ admin helpers

    def discover(self, config: dict, ctx: SyncContext, sample: bool = True) -> dict:
        """Post types the site exposes (viewable ones first) and, for the selected or all
        public types, the field paths of one published item, for building a mapping."""
        client = self.client(config, ctx)
        try:
            me = client.check_credentials()
            types = client.types()
            public = {s: t for s, t in types.items()
                      if t.get("viewable") is not False and not s.startswith("wp_")
                      and s not in ("attachment", "nav_menu_item")}
            out = {"authenticated_as": (me or {}).get("name"), "types": [], "fields": {}}
            for slug, t in public.items():
                out["types"].append({"slug": slug, "name": t["name"], "rest_base": t["rest_base"],
                                     "default_role": effective_mapping(slug, None)["role"]})
            if sample:
                for slug in config.get("post_types") or list(public):
                    info = types.get(slug)
                    if info is None:
                        continue
                    items = list(_take(client.collection(info, {}, per_page=1, concurrency=1, max_items=1), 1))
                    if items:
                        from kbframework_wordpress.mapping import field_paths

                        out["fields"][slug] = list(dict.fromkeys(field_paths(items[0]) + [
                            "featured_image", "featured_image_alt", "categories", "tags", "author_name"]))
            return out
        finally:
            client.close()


def _take(it, n):
    for i, x in enumerate(it):
        if i >= n:
            return
        yield x
