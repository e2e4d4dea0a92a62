"""Errors at the edges: a broad ``except Exception`` swallows what nobody foresaw, so where
one remains it must say what it swallowed (a log call, or a re-raise). Elsewhere the
handler names the exceptions that can occur.

Every domain error is a ``KBError`` that declares its HTTP status and its code, so what
escapes a service is a clear JSON error carrying that code, never a 500.

``NOT_YET`` counts the silent broad handlers still to narrow, per file; it may only shrink
(the test fails when a file has more than listed, and when a listed file has fewer, so
the list is kept current)."""
from __future__ import annotations

import ast
import builtins
import functools
import importlib
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("kbframework", "admin", "plugins", "presets")
LOGS = {"exception", "error", "warning", "info", "debug", "log", "critical"}

NOT_YET: dict[str, int] = {}

#: exception classes that are not domain errors, and why
NOT_DOMAIN = {
    "TimeLimitExceeded": "a BaseException on purpose: a job's time limit must get past every except Exception",
}


def _is_broad(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(n, ast.Name) and n.id in ("Exception", "BaseException") for n in names)


def _speaks(handler: ast.ExceptHandler) -> bool:
    for node in ast.walk(ast.Module(body=handler.body, type_ignores=[])):
        if isinstance(node, ast.Raise):
            return True
        if isinstance(node, ast.Call):
            f = node.func
            if (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")) in LOGS:
                return True
    return False


def silent_broad_handlers(source: str) -> list[int]:
    return [n.lineno for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.ExceptHandler) and _is_broad(n) and not _speaks(n)]


def test_the_checker_tells_silent_from_logged():
    src = '''
try:
    f()
except Exception:
    pass
try:
    f()
except Exception:
    log.exception("f failed")
try:
    f()
except (ValueError, Exception) as exc:
    raise Wrapped() from exc
try:
    f()
except:
    return None
try:
    f()
except KeyError:
    pass
'''
    assert silent_broad_handlers(src) == [4, 16]


def test_every_broad_except_logs_or_reraises():
    found = Counter()
    for folder in FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            if "node_modules" in path.parts:
                continue
            n = len(silent_broad_handlers(path.read_text()))
            if n:
                found[str(path.relative_to(ROOT))] = n
    grown = {f: n for f, n in found.items() if n > NOT_YET.get(f, 0)}
    assert not grown, f"a broad except that swallows silently (narrow it, or log what it swallowed): {grown}"
    shrunk = {f: (NOT_YET[f], found.get(f, 0)) for f in NOT_YET if found.get(f, 0) < NOT_YET[f]}
    assert not shrunk, f"fewer silent handlers than NOT_YET lists (lower the counts): {shrunk}"


# --------------------------------------------------------------------------- typed errors

_BUILTIN_EXCEPTIONS = {n for n in dir(builtins) if isinstance(getattr(builtins, n), type)
                       and issubclass(getattr(builtins, n), BaseException)}


def _sources():
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "node_modules" not in path.parts:
                yield path


def _base_name(node: ast.expr) -> str:
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def exception_classes(files: dict[str, str]) -> dict[tuple[str, str], tuple[ast.ClassDef, bool]]:
    """Every exception class defined in ``files`` ({path: source}): (path, name) -> (class,
    derives from KBError), by the names of the bases (followed through the files)."""
    classes = [(path, node) for path, src in files.items() for node in ast.walk(ast.parse(src))
               if isinstance(node, ast.ClassDef)]
    kb, exc = {"KBError"}, set(_BUILTIN_EXCEPTIONS)
    changed = True
    while changed:
        changed = False
        for _, node in classes:
            bases = {_base_name(b) for b in node.bases}
            if node.name not in exc and bases & exc:
                exc.add(node.name)
                changed = True
            if node.name not in kb and bases & kb:
                kb.add(node.name)
                changed = True
    return {(path, node.name): (node, node.name in kb) for path, node in classes
            if node.name in exc and node.name not in _BUILTIN_EXCEPTIONS}


def _declares(node: ast.ClassDef) -> set[str]:
    names = set()
    for stmt in node.body:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(
            stmt, ast.AnnAssign) else []
        names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def test_the_class_checker_follows_bases_across_files():
    found = exception_classes({
        "a.py": "class KBError(Exception):\n    status = 400\n    code = 'x'\n",
        "b.py": "from a import KBError\nclass Mine(errors.KBError):\n    code = 'mine'\n"
                "class Deeper(Mine):\n    status = 409\n    code = 'deeper'\n",
        "c.py": "class Loose(ValueError):\n    pass\nclass NotAnError:\n    pass\n",
    })
    assert {k: kb for k, (_, kb) in found.items()} == {("a.py", "KBError"): True, ("b.py", "Mine"): True,
                                                       ("b.py", "Deeper"): True, ("c.py", "Loose"): False}
    assert _declares(found["b.py", "Mine"][0]) == {"code"}
    assert _declares(found["b.py", "Deeper"][0]) == {"status", "code"}


@functools.lru_cache(maxsize=1)
def _all_exception_classes():
    return exception_classes({str(p.relative_to(ROOT)): p.read_text() for p in _sources()})


def test_every_domain_error_is_a_kberror():
    loose = sorted(f"{path}: {name}" for (path, name), (_, kb) in _all_exception_classes().items()
                   if not kb and name not in NOT_DOMAIN)
    assert not loose, f"exception classes that are not KBError subclasses (derive from KBError or one of " \
                      f"its subclasses, with a status and a code): {loose}"


def test_every_kberror_declares_its_status_and_code():
    vague = {f"{path}: {name}": sorted({"status", "code"} - _declares(node))
             for (path, name), (node, kb) in _all_exception_classes().items()
             if kb and not {"status", "code"} <= _declares(node)}
    assert not vague, f"KBError subclasses that do not declare both a status and a code: {vague}"


def _module_of(path: str) -> str:
    parts = Path(path).with_suffix("").parts
    if parts[0] in ("plugins", "presets"):
        parts = parts[2:]  # plugins/<distribution>/<package>/...
    elif parts[0] == "admin":
        parts = ("kbframework", *parts)  # installed as kbframework.admin
    return ".".join(p for p in parts if p != "__init__")


def test_module_names_follow_the_installed_packages():
    assert _module_of("kbframework/web/inputs.py") == "kbframework.web.inputs"
    assert _module_of("plugins/pdf/kbframework_pdf/extract.py") == "kbframework_pdf.extract"
    assert _module_of("admin/views/settings.py") == "kbframework.admin.views.settings"
    assert _module_of("presets/events/kbframework_preset_events/__init__.py") == "kbframework_preset_events"
    for path in ("admin/views/settings.py", "plugins/pdf/kbframework_pdf/extract.py",
                 "presets/events/kbframework_preset_events/__init__.py"):
        importlib.import_module(_module_of(path))


def _kberror_subclasses():
    """The real classes, imported from the modules that define them."""
    out = []
    for (path, name), (_, kb) in sorted(_all_exception_classes().items()):
        if kb and name != "KBError":
            out.append(getattr(importlib.import_module(_module_of(path)), name))
    return out


@pytest.fixture(scope="module")
def error_app():
    from flask import Flask

    from kbframework.errors import KBError
    from kbframework.web import errors

    app = Flask(__name__)
    errors.init_app(app)
    raised: dict = {}

    @app.get("/api/raise")
    def _raise():
        raise raised["exc"]

    def throw(exc: KBError):
        raised["exc"] = exc
        return app.test_client().get("/api/raise")

    return throw


def test_every_kberror_reaches_an_api_client_as_its_status_and_code(error_app):
    from kbframework.errors import KBError

    classes = _kberror_subclasses()
    assert len(classes) >= 20  # the ones above were found and imported, not skipped
    for cls in classes:
        assert issubclass(cls, KBError), cls
        assert isinstance(cls.status, int) and 400 <= cls.status < 600, (cls, cls.status)
        assert isinstance(cls.code, str) and cls.code and cls.code != KBError.code, (cls, cls.code)
        exc = cls.__new__(cls)
        KBError.__init__(exc, f"{cls.__name__} went wrong.")
        r = error_app(exc)
        assert r.status_code == cls.status, cls
        assert r.get_json() == {"error": {"code": cls.code, "message": f"{cls.__name__} went wrong."}}, cls


def test_an_errors_own_code_and_details_reach_the_body(error_app):
    from kbframework.errors import ValidationFailed
    from kbframework.orgs.budget import BudgetExceeded
    from kbframework.text.inputs import BadInput, fits

    r = error_app(ValidationFailed("Some settings are not valid.", code="unknown_setting",
                                   details={"x": ["is not a setting"]}))
    assert r.status_code == 400
    assert r.get_json() == {"error": {"code": "unknown_setting", "message": "Some settings are not valid.",
                                      "details": {"x": ["is not a setting"]}}}
    with pytest.raises(BadInput) as info:
        fits("x" * 31, "mode", 30)
    r = error_app(info.value)
    assert (r.status_code, r.get_json()["error"]["code"]) == (400, "invalid_input")
    r = error_app(BudgetExceeded({"state": "exceeded"}))
    assert (r.status_code, r.get_json()["error"]["code"]) == (429, "budget_exceeded")
