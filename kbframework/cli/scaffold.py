"""``kbf plugin new NAME --kind connector|preset|extractor|card``: a new plugin distribution.

It writes a folder that is complete on day one: ``pyproject.toml`` with the entry point in
the ``kbframework`` group, the package with its hook implementations, a README, and a
first test that asks the real host (the admin API of an app on the embedded services)
whether the plugin loaded and then runs it once end to end. Install it with
``pip install -e`` and run ``pytest``; the fixtures come from ``kbframework.testing``.
The guide that walks through it is docs/plugins.md.
"""
from __future__ import annotations

import keyword
import re
from pathlib import Path

from kbframework.errors import KBError

KINDS = ("connector", "preset", "extractor", "card")
NAME_RE = re.compile(r"^[a-z][a-z0-9]*([_-][a-z0-9]+)*$")


def names(name: str) -> dict:
    """Every spelling the templates need, from one plugin name such as ``ics`` or ``event-feed``."""
    if not isinstance(name, str) or not NAME_RE.match(name) or len(name) > 40:
        raise KBError(f"'{name}' is not a usable plugin name: use lower-case letters, digits and single "
                      f"'-' or '_' between them, starting with a letter (e.g. 'ics', 'event-feed').")
    snake = name.replace("-", "_")
    if keyword.iskeyword(snake):
        raise KBError(f"'{name}' is a Python keyword; choose another name.")
    camel = "".join(p.capitalize() for p in snake.split("_"))
    return {"name": name, "snake": snake, "camel": camel, "title": " ".join(p.capitalize() for p in snake.split("_")),
            "dist": f"kbframework-{name.replace('_', '-')}", "pkg": f"kbframework_{snake}"}


def render(text: str, v: dict) -> str:
    for k, val in v.items():
        text = text.replace("{{" + k + "}}", val)
    return text


def new_plugin(name: str, kind: str = "connector", directory: str | Path = ".", force: bool = False) -> Path:
    """Write ``directory/NAME/`` and return its path. Refuses to overwrite unless ``force``."""
    if kind not in KINDS:
        raise KBError(f"Unknown kind '{kind}'; choose one of {', '.join(KINDS)}.")
    v = names(name)
    v["kind"] = kind
    target = Path(directory) / name
    if target.exists() and any(target.iterdir()) and not force:
        raise KBError(f"{target} already exists and is not empty (use --force to write into it).")
    files = {**COMMON, **TEMPLATES[kind]}
    for rel, text in files.items():
        path = target / render(rel, v)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render(text, v).lstrip("\n"), encoding="utf-8")
    return target


# --------------------------------------------------------------------------- common files

PYPROJECT = '''
[build-system]
requires = ["setuptools>=64", "wheel"]
build-backend = "setuptools.build_meta"

[project]
name = "{{dist}}"
version = "0.1.0"
description = "kbframework plugin: {{title}} ({{kind}})."
requires-python = ">=3.11"
dependencies = ["kbframework"]

[project.optional-dependencies]
test = ["pytest>=8"]

# The host finds plugins through this entry point group; the name on the left is the
# plugin's name (in `kbf plugins`, /api/admin/v1/plugins and KB_LOAD_PLUGINS).
[project.entry-points.kbframework]
{{name}} = "{{pkg}}"

[tool.setuptools.packages.find]
include = ["{{pkg}}*"]

[tool.pytest.ini_options]
testpaths = ["tests"]
addopts = "-p no:cacheprovider"
'''

COMMON = {
    "pyproject.toml": PYPROJECT,
    "tests/__init__.py": "",
}

README_HEAD = '''
# {{dist}}

A kbframework plugin ({{kind}}), written with `kbf plugin new {{name}} --kind {{kind}}`.
The guide for plugin authors is docs/plugins.md in the kbframework repository.

## Install and check

```bash
pip install -e .           # in the environment where kbframework is installed
kbf plugins                # lists "{{name}}" with the hooks it implements
pytest -q                  # the fixtures come from kbframework.testing (a pytest plugin)
```

The tests start the real embedded PostgreSQL + pgvector and Redis in a scratch folder
(a few seconds); nothing is mocked except the remote system, which `kb_http_server`
fakes at the HTTP level.

Leave the plugin out without uninstalling it: `KB_LOAD_PLUGINS` lists the plugins that may
load (comma-separated entry point names). `KB_TRACE_PLUGINS=1` logs every hook call with
its timing.
'''

# --------------------------------------------------------------------------- connector

CONNECTOR_INIT = '''
"""{{dist}}: hook implementations only; the work is in connector.py and schema.py."""
from kbframework import hookimpl


@hookimpl
def kb_source_types():
    from {{pkg}}.connector import {{camel}}Connector  # here, so `kbf --help` stays fast

    return [{{camel}}Connector()]
'''

CONNECTOR_SCHEMA = '''
"""What an admin types when adding a {{title}} source, validated with marshmallow."""
from marshmallow import Schema, fields, validate

from kbframework import DOCUMENT_ROLES


class {{camel}}Config(Schema):
    url = fields.Url(required=True, schemes={"http", "https"}, require_tld=False,
                     metadata={"description": "Address of the JSON feed"})
    api_key = fields.String(load_default=None, allow_none=True,
                            metadata={"description": "Sent as a Bearer token; encrypted at rest"})
    role = fields.String(load_default="article", validate=validate.OneOf(DOCUMENT_ROLES),
                         metadata={"description": "document_role of every item"})
'''

CONNECTOR_MAIN = '''
"""The {{snake}} source type: reads a JSON feed ``{"items": [{id, title, body, url, updated,
tags, published}]}`` from the configured URL. Replace the fetching and mapping with your
remote system's; keep the shape: fetch → RawRecord, normalize → DocumentDraft."""
from __future__ import annotations

from datetime import datetime

import requests

from kbframework import (BlockedAddress, ConnectorAuthError, DocumentDraft, RawRecord, SourceConnector,
                         SourceUnavailable, safe_get)
from {{pkg}}.schema import {{camel}}Config


def _parse_time(value):
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


class {{camel}}Connector(SourceConnector):
    name = "{{snake}}"  # the source type: /api/admin/v1/sources {"type": "{{snake}}"}
    label = "{{title}}"
    config_schema = {{camel}}Config
    secret_fields = ("api_key",)  # encrypted at rest, shown masked
    supports_sync = True

    # ------------------------------------------------------------------ fetching

    def _items(self, config, ctx) -> list[dict]:
        headers = {"Accept": "application/json"}
        if config.get("api_key"):
            headers["Authorization"] = f"Bearer {config['api_key']}"
        try:
            r = safe_get(config["url"], headers=headers, allow_private=ctx.allow_private_network)
        except BlockedAddress as exc:  # the SSRF guard: private addresses need the org setting
            raise SourceUnavailable(f"{exc.message} (settings: allow_private_network)") from None
        except requests.RequestException as exc:
            raise SourceUnavailable(f"{config['url']} could not be reached: {exc}") from None
        if r.status_code in (401, 403):
            raise ConnectorAuthError(f"{config['url']} refused the credentials (HTTP {r.status_code}).")
        if r.status_code != 200:
            raise SourceUnavailable(f"{config['url']} answered HTTP {r.status_code}.")
        try:
            items = r.json()["items"]
        except (ValueError, KeyError, TypeError):
            raise SourceUnavailable(f"{config['url']} did not answer a JSON object with 'items'.") from None
        return [i for i in items if isinstance(i, dict) and i.get("id") is not None]

    def _record(self, item: dict) -> RawRecord:
        return RawRecord(external_id=str(item["id"]), payload=item, kind="item",
                         source_modified_at=_parse_time(item.get("updated")), url=item.get("url"))

    def fetch_all(self, config, ctx):
        for item in self._items(config, ctx):
            yield self._record(item)

    def fetch_changed(self, config, since, ctx):
        for rec in self.fetch_all(config, ctx):
            if rec.source_modified_at is None or rec.source_modified_at > since:
                yield rec

    def fetch_one(self, config, external_id, ctx):
        return next((r for r in self.fetch_all(config, ctx) if r.external_id == str(external_id)), None)

    # ------------------------------------------------------------------ mapping

    def normalize(self, record, config, ctx) -> DocumentDraft:
        item = record.payload
        title = str(item.get("title") or f"Item {record.external_id}").strip()
        body = str(item.get("body") or "").strip()
        return DocumentDraft(
            title=title,
            normalized_content=f"# {title}\\n\\n{body}".strip(),
            raw_content=body,
            type="{{snake}}_item",
            document_role=config.get("role") or "article",
            external_id=record.external_id,
            source_url=record.url,
            source_modified_at=record.source_modified_at,
            tags=[str(t).lower() for t in item.get("tags") or []],
            published=item.get("published", True) is not False,
        )
'''

CONNECTOR_TEST = '''
"""First tests: does the real host load the plugin, and does a sync answer questions?"""

FEED = {"items": [
    {"id": 1, "title": "Warranty", "url": "https://example.com/warranty",
     "body": "Every lamp has a warranty of two years from the date of purchase.",
     "updated": "2026-01-10T09:00:00Z", "tags": ["Policy"]},
    {"id": 2, "title": "Opening hours", "url": "https://example.com/hours",
     "body": "The showroom is open Monday to Friday from 9:00 to 17:00.",
     "updated": "2026-01-11T09:00:00Z"},
    {"id": 3, "title": "Draft", "body": "Not ready yet.", "published": False},
]}


def feed(method, path, headers, body):
    if path == "/feed.json":
        return 200, {}, FEED
    return 404, {}, {"error": "no such page"}


def test_the_host_loaded_the_plugin(kb_admin):
    data = kb_admin.get("/api/admin/v1/plugins").get_json()
    mine = [p for p in data["plugins"] if p["name"] == "{{name}}"]
    assert mine, "not loaded: is the distribution installed (pip install -e .) and KB_LOAD_PLUGINS unset?"
    assert not mine[0].get("error"), mine[0].get("error")
    assert "kb_source_types" in mine[0]["hooks"]
    assert "{{snake}}" in data["source_types"]


def test_sync_then_answer(kb_source, kb_http_server):
    remote = kb_http_server(feed)
    src = kb_source("{{snake}}", {"url": remote.url + "/feed.json"})
    result = src.sync()
    assert result["status"] == "ok", result
    docs = {d["external_id"]: d for d in src.documents()}
    assert set(docs) == {"1", "2"}  # the unpublished item is not kept
    assert docs["1"]["status"] == "active" and docs["1"]["chunk_count"] >= 1
    assert docs["1"]["tags"] == ["policy"]
    out = src.ask("How long is the warranty?")
    assert out["sources"][0]["document_title"] == "Warranty"
    assert "two years" in out["answer"]


def test_a_remote_failure_marks_the_source(kb_source, kb_http_server):
    remote = kb_http_server(lambda *request: (500, {}, "down for maintenance"))
    src = kb_source("{{snake}}", {"url": remote.url + "/feed.json"})
    result = src.sync()
    assert result["status"] == "error" and "HTTP 500" in result["error"]
    assert src.info()["status"] == "error"
'''

CONNECTOR_README = README_HEAD + '''
## What it does

`{{pkg}}/connector.py` is a source type named `{{snake}}` that reads a JSON feed
(`{"items": [{id, title, body, url, updated, tags, published}]}`) and turns each item into a
document. Add a source:

```bash
kbf source add --org demo --type {{snake}} --name "My feed" --config '{"url": "https://example.com/feed.json"}'
kbf source sync SOURCE_ID --full --wait
```

Replace `_items` and `normalize` with your remote system's API and fields; the test in
`tests/test_plugin.py` fakes the remote with `kb_http_server`.
'''

# --------------------------------------------------------------------------- preset

PRESET_INIT = '''
"""{{dist}}: the "{{snake}}" mode preset."""
from kbframework import hookimpl

from {{pkg}}.preset import PRESET


@hookimpl
def kb_mode_presets():
    return [PRESET]
'''

PRESET_MAIN = '''
"""The preset: mode, prompt template ({brand} is filled in), retrieval defaults, role boosts
(highest first: ×1.3, ×1.1, then ×1.0), card types and the fallback text."""
from kbframework import Preset

PROMPT = (
    "You are the {{title}} assistant of {brand}. Answer using only the numbered context passages "
    "and cite them as [n]. If the answer is not in the context, say so. Keep replies short."
)

PRESET = Preset(
    name="{{snake}}",
    mode="{{snake}}",
    label="{{title}}",
    prompt_template=PROMPT,
    fallback_text="I don't know that yet ({{title}}). Could you ask it another way?",
    role_priority=["support", "manual", "article"],
    card_types=["article"],
    retrieval_limit=6,
    future_events_only=False,
    knowledge="strict",
)
'''

PRESET_TEST = '''
"""First tests: does the real host load the preset, and does the chat use it?"""
from {{pkg}}.preset import PRESET


def test_the_host_loaded_the_plugin(kb_admin):
    data = kb_admin.get("/api/admin/v1/plugins").get_json()
    mine = [p for p in data["plugins"] if p["name"] == "{{name}}"]
    assert mine, "not loaded: is the distribution installed (pip install -e .) and KB_LOAD_PLUGINS unset?"
    assert not mine[0].get("error"), mine[0].get("error")
    assert "kb_mode_presets" in mine[0]["hooks"]
    assert "{{snake}}" in data["presets"]


def test_the_chat_answers_in_this_mode(kb_admin):
    r = kb_admin.post("/api/admin/v1/chat", json={"question": "Do you ship to Iceland?", "mode": "{{snake}}"})
    assert r.status_code == 200, r.get_data(as_text=True)
    assert r.get_json()["answer"] == PRESET.fallback_text  # nothing known yet: the preset's fallback
    r = kb_admin.post("/api/admin/v1/documents/manual?wait=1", json={
        "title": "Shipping", "role": "support",
        "body": "We ship to every country in Europe, Iceland included, within five working days."})
    assert r.status_code == 201, r.get_data(as_text=True)
    out = kb_admin.post("/api/admin/v1/chat", json={"question": "Do you ship to Iceland?",
                                                    "mode": "{{snake}}"}).get_json()
    assert out["mode"] == "{{snake}}"
    assert out["sources"][0]["document_title"] == "Shipping"
    assert "five working days" in out["answer"]
'''

PRESET_README = README_HEAD + '''
## What it does

`{{pkg}}/preset.py` adds the mode preset `{{snake}}`: its prompt template, retrieval limit,
role boosts, card types and fallback text. Choose it per request (`"mode": "{{snake}}"` in
the chat APIs, `kbf ask --mode {{snake}}`) or as the organization's default preset.
'''

# --------------------------------------------------------------------------- extractor

EXTRACTOR_INIT = '''
"""{{dist}}: a query filter extractor."""
from kbframework import hookimpl
from kbframework import FilterPart

EXTRACTOR = "{{name}}"

# phrase in the question → (filter field, value). Fields the host applies: date_range,
# price_min, price_max, currency, category, tag, in_stock, city, venue, past.
PHRASES = {
    "ships today": ("in_stock", True),
    "ready to ship": ("in_stock", True),
}


@hookimpl
def kb_extract_filters(query, context):
    q = query.lower()
    return [FilterPart(field, value, extractor=EXTRACTOR, matched=phrase)
            for phrase, (field, value) in PHRASES.items() if phrase in q]
'''

EXTRACTOR_TEST = '''
"""First tests: does the real host load the extractor, and does the chat apply its filter?"""


def test_the_host_loaded_the_plugin(kb_admin):
    data = kb_admin.get("/api/admin/v1/plugins").get_json()
    mine = [p for p in data["plugins"] if p["name"] == "{{name}}"]
    assert mine, "not loaded: is the distribution installed (pip install -e .) and KB_LOAD_PLUGINS unset?"
    assert not mine[0].get("error"), mine[0].get("error")
    assert "kb_extract_filters" in mine[0]["hooks"]


def test_the_chat_applies_the_filter(kb_admin):
    out = kb_admin.post("/api/admin/v1/chat", json={"question": "which lamps are ready to ship?"}).get_json()
    filters = out["debug"]["filters"]
    mine = [p for p in filters["parts"] if p["extractor"] == "{{name}}"]
    assert mine and mine[0]["field"] == "in_stock" and mine[0]["value"] is True and mine[0]["applied"]
    assert filters["merged"].get("in_stock") is True
    out = kb_admin.post("/api/admin/v1/chat", json={"question": "which lamps do you sell?"}).get_json()
    assert not [p for p in out["debug"]["filters"]["parts"] if p["extractor"] == "{{name}}"]
'''

EXTRACTOR_README = README_HEAD + '''
## What it does

`{{pkg}}/__init__.py` implements `kb_extract_filters(query, context)`: it finds phrases in
the visitor's question and returns `FilterPart`s. The host merges the parts of every
extractor (installed plugins first, then the built-in rules), logs each with its
extractor's name and shows them in the admin debug view and `kbf filters`.
'''

# --------------------------------------------------------------------------- card

CARD_INIT = '''
"""{{dist}}: a card for support documents (firstresult: return None to leave a document
to the next plugin, in the end the built-in cards)."""
from kbframework import hookimpl
from kbframework import Card

BADGE = "{{title}}"


@hookimpl
def kb_build_card(document, preset):
    if document.get("document_role") != "support":
        return None
    text = " ".join((document.get("normalized_content") or "").split())
    url = document.get("source_url")
    return Card(type="article", document_id=str(document["id"]), title=document["title"],
                url=url if url and url.startswith(("http://", "https://")) else None,
                data={"excerpt": text[:160], "badge": BADGE,
                      "cta": {"label": "Read the help article", "url": url} if url else None})
'''

CARD_TEST = '''
"""First tests: does the real host load the card plugin, and does the chat show its card?"""
from {{pkg}} import BADGE


def test_the_host_loaded_the_plugin(kb_admin):
    data = kb_admin.get("/api/admin/v1/plugins").get_json()
    mine = [p for p in data["plugins"] if p["name"] == "{{name}}"]
    assert mine, "not loaded: is the distribution installed (pip install -e .) and KB_LOAD_PLUGINS unset?"
    assert not mine[0].get("error"), mine[0].get("error")
    assert "kb_build_card" in mine[0]["hooks"]


def test_the_chat_shows_the_card(kb_admin):
    r = kb_admin.post("/api/admin/v1/documents/manual?wait=1", json={
        "title": "Resetting the router", "role": "support", "source_url": "https://example.com/help/reset",
        "body": "To reset the router, hold the reset button for ten seconds until the light blinks."})
    assert r.status_code == 201, r.get_data(as_text=True)
    out = kb_admin.post("/api/admin/v1/chat", json={"question": "how do I reset the router?"}).get_json()
    cards = [c for c in out["cards"] if c.get("badge") == BADGE]
    assert cards and cards[0]["title"] == "Resetting the router"
    assert cards[0]["cta"]["url"] == "https://example.com/help/reset"
'''

CARD_README = README_HEAD + '''
## What it does

`{{pkg}}/__init__.py` implements `kb_build_card(document, preset)` for support documents:
the card shown under an answer (title, link, excerpt, a badge and a call to action). Cards
are built on the server from the document's columns, never from the model's output.
Return `None` for documents you do not handle.
'''

TEMPLATES = {
    "connector": {"README.md": CONNECTOR_README, "{{pkg}}/__init__.py": CONNECTOR_INIT,
                  "{{pkg}}/connector.py": CONNECTOR_MAIN, "{{pkg}}/schema.py": CONNECTOR_SCHEMA,
                  "tests/test_plugin.py": CONNECTOR_TEST},
    "preset": {"README.md": PRESET_README, "{{pkg}}/__init__.py": PRESET_INIT, "{{pkg}}/preset.py": PRESET_MAIN,
               "tests/test_plugin.py": PRESET_TEST},
    "extractor": {"README.md": EXTRACTOR_README, "{{pkg}}/__init__.py": EXTRACTOR_INIT,
                  "tests/test_plugin.py": EXTRACTOR_TEST},
    "card": {"README.md": CARD_README, "{{pkg}}/__init__.py": CARD_INIT, "tests/test_plugin.py": CARD_TEST},
}
