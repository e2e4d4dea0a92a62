"""The package's shape, checked: imports run one way (no module reaches back into one that
imports it, however lazily)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the folders that make up the host, and the package name each is installed as
HOST = (("kbframework", "kbframework"), ("admin", "kbframework.admin"))


def host_modules() -> dict[str, Path]:
    out = {}
    for folder, package in HOST:
        base = ROOT / folder
        for path in base.rglob("*.py"):
            rel = path.relative_to(base)
            if "migrations" in rel.parts:
                continue
            parts = list(rel.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([package, *parts])] = path
    return out


def imported_modules(path: Path, module: str, known: dict) -> set[str]:
    """Every host module ``path`` imports, at the top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
                for _ in range(node.level - 1):
                    package = package.rsplit(".", 1)[0]
                base = package + ("." + node.module if node.module else "")
            else:
                base = node.module
            for a in node.names:
                found.add(f"{base}.{a.name}" if f"{base}.{a.name}" in known else base)
    return {m for m in found if m in known and m != module}


def import_graph() -> dict[str, set[str]]:
    mods = host_modules()
    return {m: imported_modules(p, m, mods) for m, p in mods.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_the_checker_sees_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    graph = import_graph()
    assert "kbframework.sources.sync" in graph["kbframework.jobs.tasks"]  # imports inside functions count too


# Circles knowingly tolerated for a while (none now: break a circle, do not list it). The list
# may only shrink: a new circle fails, and so does one listed here that is gone.
KNOWN_CIRCLES: list[list[str]] = []


def test_no_import_circles_in_the_host():
    graph = import_graph()
    found = cycles(graph)
    new = [c for c in found if c not in KNOWN_CIRCLES]
    detail = [" ; ".join(f"{a} -> {b}" for a in comp for b in sorted(graph[a]) if b in comp) for comp in new]
    assert not new, "import circles:\n" + "\n".join(detail)
    gone = [c for c in KNOWN_CIRCLES if c not in found]
    assert not gone, f"these circles are broken now: remove them from KNOWN_CIRCLES: {gone}"


# --------------------------------------------------------------------------- the plugin boundary

PLUGIN_FOLDERS = ("plugins", "presets", "docs/examples")
ALLOWED_FOR_PLUGINS = {"kbframework", "kbframework.plugin_api"}


def plugin_files() -> list[Path]:
    return sorted(p for folder in PLUGIN_FOLDERS for p in (ROOT / folder).rglob("*.py"))


def host_imports_in(source: str) -> list[tuple[int, str]]:
    """(line, module) for every import of a ``kbframework`` module in ``source``; a name taken
    ``from kbframework`` counts as ``kbframework.<name>`` (``from kbframework import tenancy``
    is the host module, ``from kbframework import hookimpl`` the plugin API)."""
    from kbframework.plugin_api import EXPORTS

    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module == "kbframework":
            out += [(node.lineno, "kbframework" if a.name in EXPORTS else f"kbframework.{a.name}")
                    for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            out.append((node.lineno, node.module or ""))
    return [(line, n) for line, n in out if n == "kbframework" or n.startswith("kbframework.")]


def test_the_plugin_import_checker_sees_a_host_module_taken_from_the_package():
    src = ("from kbframework import hookimpl, SafeSession\nimport kbframework\n"
           "from kbframework import tenancy\nfrom kbframework.db import session_scope\n")
    assert [(line, m) for line, m in host_imports_in(src) if m not in ALLOWED_FOR_PLUGINS] == \
        [(3, "kbframework.tenancy"), (4, "kbframework.db")]


# Files that still reach into the host. The list may only shrink, like KNOWN_CIRCLES (none
# now: what a plugin needs goes into kbframework.plugin_api).
KNOWN_LEAKS: set[str] = set()


def test_plugins_import_only_the_curated_plugin_api():
    files = plugin_files()
    assert any(f.parent.name == "kbframework_wordpress" for f in files)
    leaking = {str(f.relative_to(ROOT)): [f"{line}: {mod}" for line, mod in host_imports_in(f.read_text())
                                          if mod not in ALLOWED_FOR_PLUGINS] for f in files}
    bad = {f: v for f, v in leaking.items() if v and f not in KNOWN_LEAKS}
    assert not bad, f"plugins may import only kbframework / kbframework.plugin_api: {bad}"
    clean = [f for f in KNOWN_LEAKS if not leaking.get(f)]
    assert not clean, f"these files use only the plugin API now: remove them from KNOWN_LEAKS: {clean}"


def test_the_curated_api_resolves_and_importing_kbframework_stays_cheap():
    import subprocess
    import sys

    import kbframework
    from kbframework import plugin_api

    for name in plugin_api.EXPORTS:
        assert getattr(kbframework, name) is getattr(plugin_api, name), name
    code = ("import sys, kbframework; from kbframework import hookimpl, DocumentDraft; "
            "print(sorted(m for m in ('sqlalchemy', 'flask', 'numpy', 'requests') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "[]", r.stdout


def plugin_names() -> set[str]:
    """Every name a plugin gives the host: source types and providers, installed or built in."""
    from kbframework.hooks import registry
    from kbframework.types import DOCUMENT_ROLES

    names = ({*registry.source_types()} | {p.name for p in registry.embedding_providers()}
             | {p.name for p in registry.llm_providers()})
    return names - set(DOCUMENT_ROLES)  # "manual" is a document role too: comparing roles is fine


def _literals(node) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def naming_violations(source: str, names: set[str]) -> list[tuple[int, str]]:
    """Imports of a plugin package, and comparisons of a value with a plugin's name."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, f"imports {a.name}") for a in node.names if a.name.startswith("kbframework_")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kbframework_"):
            out.append((node.lineno, f"imports {node.module}"))
        elif isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                out += [(node.lineno, f"compares with {v!r}") for v in _literals(side) if v in names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                re.match(r"kbframework_[a-z]", node.value):
            out.append((node.lineno, f"names {node.value!r}"))
    return out


def test_the_naming_checker_catches_what_it_should():
    bad = ('import kbframework_pdf\nfrom kbframework_wordpress.api import bp\n'
           'if src.type == "manual": pass\nif llm.name in ("extractive", "x"): pass\n'
           'enqueue("ingest", "kbframework_pdf.service.extract_job")\n')
    assert [line for line, _ in naming_violations(bad, {"manual", "extractive"})] == [1, 2, 3, 4, 5]
    assert naming_violations('role = "manual"\nif x.accepts_uploads: pass\n', {"manual"}) == []


def test_the_host_never_imports_or_names_a_plugin(kb_services):
    names = plugin_names()
    assert {"pdf", "wordpress", "extractive", "wordllama"} <= names
    bad = []
    for module, path in host_modules().items():
        if module.startswith(("kbframework.default_plugins", "kbframework.providers")):
            continue  # the host's own default plugins define these names
        bad += [f"{path.relative_to(ROOT)}:{line}: {what}" for line, what in naming_violations(path.read_text(), names)]
    quoted = "|".join(sorted(names))

    for tpl in sorted((ROOT / "admin" / "templates").glob("*.html")):
        for n, line in enumerate(tpl.read_text().splitlines(), 1):
            if re.search(rf"""[=!]=\s*['"]({quoted})['"]""", line):
                bad.append(f"{tpl.relative_to(ROOT)}:{n}: compares with a plugin's name")
    assert not bad, "the host must read capabilities, not names:\n" + "\n".join(bad)


# --------------------------------------------------------------------------- the documented layers

FOUNDATION = {"config", "db", "models", "errors", "clock", "security", "types", "addresses", "net", "migrate",
              "tenancy"}
SINGLE_MODULES = {"plugin_api": "plugin_api", "testing": "testing", "wsgi": "wsgi", "settings_schema": "settings"}


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) == 1:
        return None  # kbframework/__init__.py: the version and the lazy plugin API
    if parts[1] == "admin":
        return "admin"
    if (ROOT / "kbframework" / parts[1]).is_dir():
        return parts[1]
    if parts[1] in SINGLE_MODULES:
        return SINGLE_MODULES[parts[1]]
    return "foundation" if parts[1] in FOUNDATION else parts[1]


def documented_layers() -> dict[str, set[str]]:
    text = (ROOT / "docs" / "architecture.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \|[^|]*\|([^|]*)\|$", text, flags=re.M)
    return {name: set(re.findall(r"`(\w+)`", allowed)) for name, allowed in rows}


def test_docs_architecture_matches_the_imports():
    layers = documented_layers()
    assert {"foundation", "hooks", "sources", "web", "admin", "cli"} <= set(layers)
    bad = []
    for module, imported in import_graph().items():
        mine = layer_of(module)
        assert mine in layers or mine is None, f"{module}: folder '{mine}' has no row in docs/architecture.md"
        for other in imported:
            theirs = layer_of(other)
            if theirs is not None and theirs != mine and theirs not in layers.get(mine, set()):
                bad.append(f"{module} -> {other} ({mine} may not import {theirs})")
    assert not bad, "imports that docs/architecture.md does not allow:\n" + "\n".join(sorted(bad))


def imports_of_test_modules(source: str) -> list[int]:
    """Lines of ``source`` that import a test module (``tests``, ``tests.x``, ``test_x``)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
        if any(n == "tests" or n.startswith(("tests.", "test_")) for n in names):
            out.append(node.lineno)
    return out


def test_the_bench_checker_sees_a_test_import():
    src = ("import json\nfrom tests.test_wordpress_companion import CompanionSite\nimport tests\n"
           "def f():\n    from test_woocommerce import x\nfrom fakes.wordpress_site import CompanionSite\n")
    assert imports_of_test_modules(src) == [2, 3, 5]


def test_bench_imports_no_test_module():
    """What a bench shares with the tests (fake servers, the test WordPress's driver) lives in
    ``fakes/``: a bench that imported a test module would run its module code and break
    whenever a test is renamed."""
    found = {str(p.relative_to(ROOT)): lines for p in sorted((ROOT / "bench").rglob("*.py"))
             if (lines := imports_of_test_modules(p.read_text()))}
    assert not found, f"bench modules importing a test module: {found}"


# --------------------------------------------------------------------------- no spec section numbers

# the spec is not in the repository: a comment that says "§19" tells the next engineer nothing
CHECKED_FOLDERS = ("kbframework", "plugins", "presets", "admin", "widget", "wordpress-plugin", "docs/examples",
                   "tests", "bench")
PRODUCT_SUFFIXES = {".py", ".js", ".html", ".php"}
SECTION_NUMBER = re.compile(r"§\s*\d")


def section_numbers_in(text: str) -> list[int]:
    return [n for n, line in enumerate(text.splitlines(), 1) if SECTION_NUMBER.search(line)]


def test_the_section_number_checker_sees_one():
    assert section_numbers_in('x = 1\n"""Role boost (§19): ×1.3."""\n# see § 5\n') == [2, 3]
    assert section_numbers_in('price = "§ sign"\n# the mode\'s role priority\n') == []


def test_no_spec_section_numbers_in_the_product_its_tests_or_benches():
    files = [p for folder in CHECKED_FOLDERS for p in (ROOT / folder).rglob("*")
             if p.suffix in PRODUCT_SUFFIXES and p.is_file() and p != Path(__file__).resolve()]
    assert any(p.suffix == ".php" for p in files) and any(p.suffix == ".js" for p in files)
    bad = [f"{p.relative_to(ROOT)}:{n}" for p in files for n in section_numbers_in(p.read_text(errors="replace"))]
    assert not bad, "say the behaviour, not the spec's section number:\n" + "\n".join(bad)
