"""The plugin author's kit (docs/plugins.md): the guide covers every hook, every hook is
tested, `kbf plugin new` makes a distribution whose own test passes against the real host,
the iCalendar example installs and passes, KB_LOAD_PLUGINS / KB_TRACE_PLUGINS work, and a
broken plugin is named instead of taking the host down."""
from __future__ import annotations

import ast
import json
import logging
import os
import re
import subprocess
import sys
import textwrap
import tomllib
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import pytest
from marshmallow import Schema, fields

from kbframework import hookimpl
from kbframework.types import (Card, DocumentDraft, EmbeddingProvider, FilterPart, LLMProvider, LLMResult, Preset,
                               RawRecord, SourceConnector)

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "plugins.md"
SPECS = ROOT / "kbframework" / "hooks" / "specs.py"
ICS = ROOT / "docs" / "examples" / "ics"
BIN = Path(sys.executable).parent
KBF = str(BIN / "kbf")
META_TESTS = {"test_every_hook_is_documented_in_the_guide", "test_every_hook_has_a_test"}


def hook_specs() -> dict[str, list[str]]:
    """{hook name: argument names} of every @hookspec function in kbframework/hooks/specs.py."""
    out = {}
    for node in ast.parse(SPECS.read_text()).body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for dec in node.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            if isinstance(target, ast.Name) and target.id == "hookspec":
                out[node.name] = [a.arg for a in node.args.args]
    return out


def kbf(*args, env=None, check=True, cwd=None):
    e = {**os.environ, **(env or {})}
    r = subprocess.run([KBF, *args], capture_output=True, text=True, env=e, timeout=120, cwd=cwd)
    if check and r.returncode != 0:
        raise AssertionError(f"kbf {' '.join(args)} failed ({r.returncode}): {r.stderr}{r.stdout}")
    return r


def service_env(cfg, tmp_path) -> dict:
    """Run a plugin's own pytest on this session's embedded services (KB_TEST_EXTERNAL=1)
    instead of starting a second PostgreSQL and Redis."""
    from kbframework.embedded import pg_url, redis_url_for

    return {"KB_TEST_EXTERNAL": "1", "DATABASE_URL": cfg.database_url or pg_url(cfg),
            "REDIS_URL": cfg.redis_url or redis_url_for(cfg), "KB_TEST_DATA_DIR": str(tmp_path / "plugin-data"),
            "KB_LOAD_PLUGINS": ""}


def installed(dist: str) -> bool:
    r = subprocess.run([str(BIN / "pip"), "show", "-q", dist], capture_output=True, text=True)
    return r.returncode == 0


@contextmanager
def pip_installed(path: Path, dist: str):
    """``pip install --no-deps -e path`` for the block; uninstalled afterwards, even on failure
    (unless it was installed before the test)."""
    before = installed(dist)
    try:
        r = subprocess.run([str(BIN / "pip"), "install", "-q", "--no-deps", "-e", str(path)],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"pip install -e {path} failed:\n{r.stdout}\n{r.stderr}"
        yield
    finally:
        if not before:
            subprocess.run([str(BIN / "pip"), "uninstall", "-y", "-q", dist], capture_output=True, text=True,
                           timeout=120)


def run_pytest(folder: Path, env: dict) -> subprocess.CompletedProcess:
    e = {**os.environ, **env}
    e.pop("PYTEST_ADDOPTS", None)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=folder,
                          capture_output=True, text=True, env=e, timeout=300)


# =========================================================================== the meta-tests


def test_every_hook_is_documented_in_the_guide():
    specs = hook_specs()
    assert len(specs) >= 9, specs
    guide = GUIDE.read_text(encoding="utf-8")
    heads = list(re.finditer(r"^#{2,4} `?(\w+)\(([^)]*)\)`?[ \t]*$", guide, flags=re.M))
    documented, sections = {}, {}
    for i, m in enumerate(heads):
        documented[m.group(1)] = [a.strip() for a in m.group(2).split(",") if a.strip()]
        rest = guide[m.end():]
        nxt = re.search(r"^#{1,4} ", rest, flags=re.M)
        sections[m.group(1)] = rest[:nxt.start()] if nxt else rest
    for name, args in specs.items():
        assert name in documented, f"docs/plugins.md has no heading '{name}(...)'"
        assert documented[name] == args, f"docs/plugins.md documents {name}({', '.join(documented[name])}), " \
                                         f"the spec is {name}({', '.join(args)})"
        section = sections[name]
        for part in ("Receives", "Returns", "Combines", "Example", "Built-in"):
            assert f"**{part}**" in section, f"the section of {name} in docs/plugins.md lacks **{part}**"
        assert "```python" in section, f"the section of {name} has no code example"
    for name in documented:
        if name.startswith("kb_"):
            assert name in specs, f"docs/plugins.md documents {name}, which is not a hook spec"


def test_every_hook_has_a_test():
    """Some test function (not these meta-tests) under tests/ names each hook."""
    bodies = []
    for path in (ROOT / "tests").rglob("test_*.py"):
        src = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_") and node.name not in META_TESTS:
                bodies.append(ast.get_source_segment(src, node) or "")
    missing = [h for h in hook_specs() if not any(re.search(rf"\b{h}\b", b) for b in bodies)]
    assert not missing, f"hooks without a test: {missing}"


# =========================================================================== each hook, in-process


class KitConfig(Schema):
    items = fields.List(fields.Dict(), load_default=list)
    explode = fields.Boolean(load_default=False)


class KitConnector(SourceConnector):
    """A connector whose "remote system" is its own config (no network)."""

    name = "kit_feed"
    label = "Kit feed"
    config_schema = KitConfig
    supports_sync = True

    def fetch_all(self, config, ctx):
        if config.get("explode"):
            raise RuntimeError("the kit feed exploded")
        for item in config["items"]:
            yield RawRecord(external_id=str(item["id"]), payload=item)

    def fetch_changed(self, config, since, ctx):
        return self.fetch_all(config, ctx)

    def fetch_one(self, config, external_id, ctx):
        return next((r for r in self.fetch_all(config, ctx) if r.external_id == external_id), None)

    def normalize(self, record, config, ctx):
        p = record.payload
        return DocumentDraft(title=p["title"], normalized_content=p["body"], type="kit",
                             document_role=p.get("role", "article"), external_id=record.external_id,
                             source_url=p.get("url"))


class KitSource:
    @hookimpl
    def kb_source_types(self):
        return [KitConnector()]


ITEMS = [{"id": 1, "title": "Returns", "body": "Returns are accepted within 30 days with the receipt.",
          "role": "support", "url": "https://kit.example/returns"},
         {"id": 2, "title": "Boom", "body": "This item makes the normalizer fail."}]


def test_kb_source_types_a_plugin_connector_syncs_and_a_failing_fetch_marks_the_source(
        kb_register_plugin, kb_source):
    kb_register_plugin(KitSource(), "kit-source")
    src = kb_source("kit_feed", {"items": ITEMS[:1]})
    assert src.sync()["status"] == "ok"
    assert [d["title"] for d in src.documents()] == ["Returns"]
    broken = kb_source("kit_feed", {"explode": True}, name="broken feed")
    res = broken.sync()
    assert res["status"] == "error" and res["error"] == "RuntimeError: the kit feed exploded"
    assert broken.info()["status"] == "error" and "exploded" in broken.info()["last_error"]
    assert src.info()["status"] == "active"  # the other source is untouched


def test_kb_source_types_raising_is_a_startup_error_naming_the_plugin(kb_register_plugin, kb_services):
    from kbframework.hooks import registry
    from kbframework.errors import StartupError

    class Broken:
        @hookimpl
        def kb_source_types(self):
            raise RuntimeError("cannot read my settings")

    kb_register_plugin(Broken(), "broken-types")
    with pytest.raises(StartupError) as exc:
        registry.validate_startup()
    assert "'broken-types'" in exc.value.message and "kb_source_types" in exc.value.message
    assert "cannot read my settings" in exc.value.message and exc.value.details["plugin"] == "broken-types"


def test_kb_normalize_overrides_and_a_raising_one_fails_only_its_items(kb_register_plugin, kb_source):
    class Normalizer:
        @hookimpl
        def kb_normalize(self, record, source_type):
            if source_type != "kit_feed":
                return None
            if record.payload["title"] == "Boom":
                raise ValueError("no body today")
            return DocumentDraft(title=record.payload["title"].upper(), normalized_content=record.payload["body"],
                                 type="kit", external_id=record.external_id)

    kb_register_plugin(KitSource(), "kit-source")
    kb_register_plugin(Normalizer(), "kit-normalizer")
    src = kb_source("kit_feed", {"items": ITEMS})
    res = src.sync()
    assert res["status"] == "ok" and res["stats"]["errors"] == 1
    assert [d["title"] for d in src.documents()] == ["RETURNS"]  # the plugin's draft, not the connector's
    from kbframework.db import session_scope
    from kbframework.models import SyncRun
    from sqlalchemy import select

    with session_scope() as s:
        run = s.scalars(select(SyncRun).order_by(SyncRun.started_at.desc())).first()
        assert run.status == "partial" and "2: no body today" in run.error


def test_kb_field_mappers_is_declared_and_collected(kb_register_plugin):
    import pluggy

    class Mappers:
        @hookimpl
        def kb_field_mappers(self):
            return {"upper": lambda payload, path: str(payload.get(path, "")).upper()}

    pm = kb_register_plugin(Mappers(), "kit-mappers")
    merged = {}
    for got in pm.hook.kb_field_mappers():
        merged.update(got)
    assert merged["upper"]({"title": "lamp"}, "title") == "LAMP"

    class Typo:
        @hookimpl
        def kb_field_mappers(self, paths):  # not an argument of the spec
            return {}

    with pytest.raises(pluggy.PluginValidationError):
        pm.register(Typo(), name="kit-typo")


def test_kb_field_mappers_read_wordpress_mapping_paths(kb_register_plugin):
    """A mapping path written ``name:rest`` is read by the plugin's reader (here in the
    WordPress connector's field mapping)."""
    from kbframework.hooks import registry
    from kbframework.errors import StartupError
    from kbframework_wordpress.mapping import build_draft, effective_mapping

    class Mappers:
        @hookimpl
        def kb_field_mappers(self):
            return {"shout": lambda payload, path: str(
                (payload.get(path.split(".")[0]) or {}).get("rendered", "")).upper() + "!"}

    kb_register_plugin(Mappers(), "kit-shout")
    post = {"id": 7, "status": "publish", "title": {"rendered": "Jazz night"},
            "content": {"rendered": "<p>Live quartet.</p>"}, "link": "https://x.example/jazz",
            "modified_gmt": "2026-11-01T10:00:00", "type": "post"}
    mapping = effective_mapping("post", {"text": ["shout:title", "content.rendered"]})
    draft = build_draft(post, mapping, "UTC")
    assert "JAZZ NIGHT!" in draft.normalized_content and "Live quartet." in draft.normalized_content

    class Clash:
        @hookimpl
        def kb_field_mappers(self):
            return {"shout": lambda payload, path: None}

    kb_register_plugin(Clash(), "kit-clash")
    with pytest.raises(StartupError) as exc:
        registry.field_mappers()
    assert "kit-shout" in exc.value.message and "kit-clash" in exc.value.message


def test_kb_extract_filters_merged_and_a_raising_extractor_is_reported(kb_register_plugin, kb_admin):
    class Extractor:
        @hookimpl
        def kb_extract_filters(self, query):
            return [FilterPart("in_stock", True, extractor="kit", matched="ready to ship")] \
                if "ready to ship" in query else []

    class Broken:
        @hookimpl
        def kb_extract_filters(self, query, context):
            raise KeyError("vocabulary")

    kb_register_plugin(Extractor(), "kit-extractor")
    kb_register_plugin(Broken(), "kit-broken-extractor")
    r = kb_admin.post("/api/admin/v1/chat", json={"question": "which lamps are ready to ship?"})
    assert r.status_code == 200, r.get_data(as_text=True)
    f = r.get_json()["debug"]["filters"]
    assert {"field": "in_stock", "value": True, "extractor": "kit", "matched": "ready to ship",
            "applied": True} in f["parts"]
    assert f["merged"]["in_stock"] is True
    assert f["errors"] == [{"extractor": "kit-broken-extractor", "error": "KeyError: 'vocabulary'"}]


def _note(kb_admin, **kw):
    data = {"title": "Resetting the router", "role": "support", "source_url": "https://kit.example/reset",
            "body": "To reset the router, hold the reset button for ten seconds until the light blinks."}
    r = kb_admin.post("/api/admin/v1/documents/manual?wait=1", json={**data, **kw})
    assert r.status_code == 201, r.get_data(as_text=True)


def test_kb_build_card_first_result_and_a_raising_card_plugin_is_skipped(kb_register_plugin, kb_admin):
    class Cards:
        @hookimpl
        def kb_build_card(self, document, preset):
            if document["document_role"] != "support":
                return None
            return Card(type="article", document_id=str(document["id"]), title=document["title"],
                        url=document["source_url"], data={"badge": f"help ({preset.name})"})

    class Broken:
        @hookimpl(tryfirst=True)
        def kb_build_card(self, document):
            raise RuntimeError("card template missing")

    _note(kb_admin)
    kb_register_plugin(Cards(), "kit-cards")
    out = kb_admin.post("/api/admin/v1/chat", json={"question": "how do I reset the router?",
                                                    "mode": "default"}).get_json()
    assert out["cards"][0]["badge"] == "help (default)" and out["cards"][0]["title"] == "Resetting the router"
    kb_register_plugin(Broken(), "kit-broken-cards")
    r = kb_admin.post("/api/admin/v1/chat", json={"question": "how do I reset the router?", "mode": "default"})
    assert r.status_code == 200, r.get_data(as_text=True)  # the broken plugin is skipped, not fatal
    assert r.get_json()["cards"][0]["badge"] == "help (default)"


def test_kb_mode_presets_adds_a_mode_and_a_duplicate_name_stops_startup(kb_register_plugin, kb_admin):
    from kbframework.hooks import registry
    from kbframework.errors import StartupError

    preset = Preset(name="kit", mode="kit", label="Kit", prompt_template="You help {brand}.",
                    fallback_text="Kit knows nothing about that.")

    class Presets:
        @hookimpl
        def kb_mode_presets(self):
            return [preset]

    kb_register_plugin(Presets(), "kit-presets")
    assert "kit" in kb_admin.get("/api/admin/v1/plugins").get_json()["presets"]
    out = kb_admin.post("/api/admin/v1/chat", json={"question": "what is the meaning of life?", "mode": "kit"})
    assert out.status_code == 200 and out.get_json()["answer"] == "Kit knows nothing about that."
    kb_register_plugin(Presets(), "kit-presets-again")
    with pytest.raises(StartupError) as exc:
        registry.presets()
    assert "'kit'" in exc.value.message and "kit-presets" in exc.value.message


class KitLLM(LLMProvider):
    name = "kit-llm"
    model = "kit-1"

    def available(self):
        return True

    def complete(self, messages, *, max_tokens=600, temperature=0.2, stream=False, on_token=None, **kwargs):
        if "search filters" in messages[0]["content"]:  # the built-in planner's JSON call
            return LLMResult(text="{}", model=self.model)
        return LLMResult(text="The kit model says: within 30 days [1].", model=self.model, tokens_in=10,
                         tokens_out=8)


class KitEmbedder(EmbeddingProvider):
    name = "kit-emb"
    model = "kit-emb-4"
    dim = 4
    batch_size = 8
    needs_key = False

    def available(self):
        return True

    def embed_batch(self, texts):
        return [[1.0, 0.0, 0.0, 0.0] for _ in texts]

    def count_tokens(self, text):
        return len(text.split())


def test_kb_llm_providers_and_kb_embedding_providers(kb_register_plugin, kb_source):
    from kbframework.hooks import registry

    class Providers:
        @hookimpl
        def kb_llm_providers(self):
            return [KitLLM()]

        @hookimpl
        def kb_embedding_providers(self):
            return [KitEmbedder()]

    kb_register_plugin(KitSource(), "kit-source")
    kb_register_plugin(Providers(), "kit-providers")
    assert registry.embedder("kit-emb").model == "kit-emb-4"
    assert registry.embedder().name == "wordllama"  # chosen by KB_EMBEDDING_PROVIDER, not by installing
    assert registry.llm("kit-llm").model == "kit-1"
    src = kb_source("kit_feed", {"items": ITEMS[:1]})
    src.sync()
    out = src.ask("how long do I have to return something?")  # KB_LLM_PROVIDER=auto takes the plugin's model
    assert out["answer"].startswith("The kit model says: within 30 days")
    assert out["debug"]["llm"]["provider"] == "kit-llm" and out["debug"]["llm"]["used_llm"] is True


def test_kb_register_blueprints_adds_routes_and_a_raising_one_is_named(kb_register_plugin, kb_services):
    from flask import Blueprint

    from kbframework.errors import StartupError
    from kbframework.web import create_app

    bp = Blueprint("kit_pages", __name__)
    bp.add_url_rule("/kit/hello", "hello", lambda: {"hello": "from a plugin"})

    class Pages:
        @hookimpl
        def kb_register_blueprints(self, app):
            app.register_blueprint(bp)

    kb_register_plugin(Pages(), "kit-pages")
    app = create_app({"TESTING": True})
    assert app.test_client().get("/kit/hello").get_json() == {"hello": "from a plugin"}

    class Broken:
        @hookimpl
        def kb_register_blueprints(self, app):
            raise ImportError("flask_extra is not installed")

    kb_register_plugin(Broken(), "kit-broken-pages")
    with pytest.raises(StartupError) as exc:
        create_app({"TESTING": True})
    assert "'kit-broken-pages'" in exc.value.message and "flask_extra" in exc.value.message


# =========================================================================== load control, tracing, listing


def test_kb_load_plugins_limits_loading_and_the_listing_shows_what_loaded(kb_admin):
    rows = json.loads(kbf("plugins", "--json", env={"KB_LOAD_PLUGINS": "manual,events"}).stdout)
    names = {r["name"] for r in rows}
    assert {"manual", "events"} <= names and not names & {"woocommerce", "sitemap", "pdf", "wordpress"}
    assert "kbframework.default_plugins.cards" in names  # the host's own are always there
    manual = next(r for r in rows if r["name"] == "manual")
    assert manual["distribution"] == "kbframework-manual" and manual["hooks"] == ["kb_source_types"]
    data = kb_admin.get("/api/admin/v1/plugins").get_json()
    listed = {p["name"]: p for p in data["plugins"]}
    assert listed["manual"]["hooks"] == ["kb_source_types"] and listed["manual"]["version"]
    assert "manual" in data["source_types"]


def test_kb_trace_plugins_logs_every_hook_call_with_its_timing(monkeypatch, caplog):
    r = kbf("plugins", env={"KB_TRACE_PLUGINS": "1", "KB_LOAD_PLUGINS": "manual"})
    assert re.search(r"hook kb_source_types -> \['manual'\] in \d+\.\d\d ms", r.stderr), r.stderr
    assert "hook kb_mode_presets -> ['kbframework.default_plugins.presets']" in r.stderr
    # the pluggy monitoring path (pm.hook.<name>(...)), in-process
    from kbframework.hooks.manager import build_plugin_manager

    monkeypatch.setenv("KB_TRACE_PLUGINS", "1")
    pm = build_plugin_manager(load="kit-nothing")  # only the host's own plugins
    doc = {"id": "d1", "title": "T", "document_role": "article", "source_url": None, "primary_image_url": None,
           "normalized_content": "text", "metadata": {}}
    with caplog.at_level(logging.WARNING, logger="kbframework.plugins"):
        card = pm.hook.kb_build_card(document=doc, preset=None)
    assert card.title == "T"
    assert re.search(r"hook kb_build_card -> \['kbframework.default_plugins.cards'\] in \d+\.\d\d ms", caplog.text)
    monkeypatch.delenv("KB_TRACE_PLUGINS")
    caplog.clear()
    build_plugin_manager(load="kit-nothing").hook.kb_build_card(document=doc, preset=None)
    assert "hook kb_build_card" not in caplog.text  # off unless asked for


# =========================================================================== broken distributions


def fake_distribution(folder: Path, name: str, module_source: str) -> Path:
    """An installed-looking distribution (dist-info with the entry point + module) on a path."""
    folder.mkdir(parents=True, exist_ok=True)
    mod = f"kbf_kit_{name}"
    (folder / f"{mod}.py").write_text(textwrap.dedent(module_source))
    info = folder / f"kbframework_kit_{name}-0.0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: kbframework-kit-{name}\nVersion: 0.0.1\n")
    (info / "entry_points.txt").write_text(f"[kbframework]\n{name} = {mod}\n")
    return folder


def test_a_plugin_that_fails_to_import_is_listed_and_the_rest_loads(tmp_path, monkeypatch, kb_admin):
    path = fake_distribution(tmp_path / "site", "broken", "import kbf_no_such_dependency\n")
    r = kbf("plugins", env={"PYTHONPATH": str(path)})
    assert re.search(r"broken\s+FAILED TO LOAD: ModuleNotFoundError: No module named 'kbf_no_such_dependency'",
                     r.stdout), r.stdout
    assert "manual" in r.stdout and "kb_source_types" in r.stdout  # the others still load
    # the running host shows it too
    from kbframework.hooks.manager import build_plugin_manager, reset_plugin_manager

    monkeypatch.syspath_prepend(str(path))
    reset_plugin_manager(build_plugin_manager())
    try:
        data = kb_admin.get("/api/admin/v1/plugins").get_json()
        broken = next(p for p in data["plugins"] if p["name"] == "broken")
        assert "kbf_no_such_dependency" in broken["error"]
        assert "manual" in data["source_types"]
        assert kb_admin.post("/api/admin/v1/chat", json={"question": "hello?"}).status_code == 200
    finally:
        reset_plugin_manager(None)


def test_a_plugin_hook_that_raises_at_startup_is_one_clear_line(tmp_path):
    path = fake_distribution(tmp_path / "site", "angry", """
        from kbframework import hookimpl

        @hookimpl
        def kb_source_types():
            raise RuntimeError("API_TOKEN is not set")
    """)
    r = kbf("plugins", env={"PYTHONPATH": str(path)}, check=False)
    assert r.returncode != 0
    assert "The plugin 'angry' failed in kb_source_types: RuntimeError: API_TOKEN is not set" in r.stderr
    assert "Traceback" not in r.stderr
    r = kbf("plugins", env={"PYTHONPATH": str(path), "KB_LOAD_PLUGINS": "manual"})  # left out: the host starts
    assert "angry" not in r.stdout


# =========================================================================== kbf plugin new, the example


def test_every_kind_renders_a_distribution(tmp_path):
    for kind in ("connector", "preset", "extractor", "card"):
        kbf("plugin", "new", f"kit-{kind}", "--kind", kind, "--dir", str(tmp_path))
        folder = tmp_path / f"kit-{kind}"
        meta = tomllib.loads((folder / "pyproject.toml").read_text())
        pkg = f"kbframework_kit_{kind}"
        assert meta["project"]["name"] == f"kbframework-kit-{kind}"
        assert meta["project"]["entry-points"]["kbframework"] == {f"kit-{kind}": pkg}
        assert (folder / "README.md").exists() and (folder / "tests" / "test_plugin.py").exists()
        for py in folder.rglob("*.py"):
            compile(py.read_text(), str(py), "exec")
        hook = {"connector": "kb_source_types", "preset": "kb_mode_presets", "extractor": "kb_extract_filters",
                "card": "kb_build_card"}[kind]
        assert f"def {hook}(" in (folder / pkg / "__init__.py").read_text()
    r = kbf("plugin", "new", "kit-card", "--kind", "card", "--dir", str(tmp_path), check=False)
    assert r.returncode == 2 and "already exists" in r.stderr
    r = kbf("plugin", "new", "Kit Card!", "--dir", str(tmp_path), check=False)
    assert r.returncode == 2 and "not a usable plugin name" in r.stderr
    r = kbf("plugin", "new", "kit", "--kind", "widget", "--dir", str(tmp_path), check=False)
    assert r.returncode == 2 and "widget" in r.stderr


def test_scaffolded_connector_installs_loads_and_passes_its_own_test(kb_services, tmp_path):
    r = kbf("plugin", "new", "kitfeed", "--kind", "connector", "--dir", str(tmp_path))
    folder = tmp_path / "kitfeed"
    assert str(folder) in r.stdout
    with pip_installed(folder, "kbframework-kitfeed"):
        assert "kitfeed" in kbf("plugins").stdout
        res = run_pytest(folder, service_env(kb_services, tmp_path))
        assert res.returncode == 0 and "3 passed" in res.stdout, res.stdout[-3000:] + res.stderr[-2000:]
    assert not installed("kbframework-kitfeed")


def test_the_ics_example_installs_and_passes_its_tests(kb_services, tmp_path):
    try:
        import icalendar  # noqa: F401
    except ImportError:  # the example's one dependency beyond kbframework
        r = subprocess.run([str(BIN / "pip"), "install", "-q", "icalendar>=5.0"], capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, f"pip install icalendar failed: {r.stderr}"
    with pip_installed(ICS, "kbframework-ics"):
        assert "kbframework-ics" in kbf("plugins").stdout
        res = run_pytest(ICS, service_env(kb_services, tmp_path))
        assert res.returncode == 0 and " passed" in res.stdout and "failed" not in res.stdout, \
            res.stdout[-4000:] + res.stderr[-2000:]


def test_kb_register_commands_adds_kbf_commands_and_refuses_a_taken_name(kb_register_plugin):
    import click
    from click.testing import CliRunner

    from kbframework.cli.commands import add_plugin_commands, cli
    from kbframework.errors import StartupError

    class Hello:
        @hookimpl
        def kb_register_commands(self, cli):
            @cli.command("kit-hello")
            @click.argument("name")
            def hello(name):
                """Greet."""
                click.echo(f"hello {name}")

    kb_register_plugin(Hello(), "kit-hello")
    group = click.Group("kbf", commands=dict(cli.commands))
    add_plugin_commands(group)
    r = CliRunner().invoke(group, ["kit-hello", "Ada"])
    assert r.exit_code == 0 and r.output == "hello Ada\n"
    assert "kit-hello" in CliRunner().invoke(group, ["--help"]).output
    assert "ask" in group.commands and "kit-hello" not in cli.commands

    class Clash:
        @hookimpl
        def kb_register_commands(self, cli):
            @cli.command("ask")
            def ask():
                pass

    kb_register_plugin(Clash(), "kit-clash")
    group = click.Group("kbf", commands=dict(cli.commands))
    with pytest.raises(StartupError) as exc:
        add_plugin_commands(group)
    assert "kit-clash" in exc.value.message and "'ask'" in exc.value.message
    assert group.commands["ask"] is cli.commands["ask"]  # the host's command stays


def test_plugin_commands_join_kbf_when_listed_or_named_not_for_a_host_command(kb_register_plugin):
    import click
    from click.testing import CliRunner

    from kbframework.cli.commands import KBGroup, cli

    class Late:
        @hookimpl
        def kb_register_commands(self, cli):
            @cli.command("kit-late")
            def late():
                """Say so."""
                click.echo("late")

    kb_register_plugin(Late(), "kit-late")
    group = KBGroup("kbf", commands=dict(cli.commands))
    assert CliRunner().invoke(group, ["db", "--help"]).exit_code == 0
    assert "kit-late" not in group.commands  # a host command: the plugins were not asked
    r = CliRunner().invoke(group, ["kit-late"])
    assert r.exit_code == 0 and r.output == "late\n"  # a name kbf lacks: they were
    listed = KBGroup("kbf", commands=dict(cli.commands))
    assert "kit-late" in CliRunner().invoke(listed, ["--help"]).output
    assert "kit-late" not in cli.commands


def test_a_plugin_that_breaks_kbf_help_is_one_line_and_exit_3(kb_register_plugin):
    from click.testing import CliRunner

    from kbframework.cli.commands import KBGroup, cli

    class Broken:
        @hookimpl
        def kb_register_commands(self, cli):
            raise RuntimeError("no token")

    kb_register_plugin(Broken(), "kit-broken")
    r = CliRunner().invoke(KBGroup("kbf", commands=dict(cli.commands)), ["--help"])
    assert r.exit_code == 3 and "kit-broken" in r.output and "no token" in r.output and "Traceback" not in r.output
