"""The one plugin manager: specs, then entry-point plugins, then the host's default plugins.

Default plugins are registered last and their implementations are ``trylast``, so any
installed plugin overrides them. ``KB_LOAD_PLUGINS`` (comma list of entry point names)
restricts what loads; ``KB_TRACE_PLUGINS=1`` logs every hook call with its timing.
A plugin that fails to import is skipped and reported, never silently.
"""
from __future__ import annotations

import importlib
import logging
import os
import threading
import time

import pluggy

from kbframework.errors import StartupError
from kbframework.hooks import specs
from kbframework.hooks.markers import PROJECT

log = logging.getLogger("kbframework.plugins")

DEFAULT_PLUGINS = (
    "kbframework.default_plugins.providers",
    "kbframework.default_plugins.presets",
    "kbframework.default_plugins.cards",
    "kbframework.default_plugins.filters",
    "kbframework.default_plugins.metadata_filters",
    "kbframework.default_plugins.planner",
)

_lock = threading.Lock()
_pm: pluggy.PluginManager | None = None
_load_errors: list[dict] = []


def tracing() -> bool:
    """``KB_TRACE_PLUGINS=1``: every hook call is logged with its implementations and timing."""
    return os.environ.get("KB_TRACE_PLUGINS") == "1"


def trace(hook_name: str, plugin_names, ms: float, error: BaseException | None = None) -> None:
    log.warning("hook %s -> %s in %.2f ms%s", hook_name, list(plugin_names), ms,
                f" (raised {type(error).__name__}: {error})" if error is not None else "")


_trace_local = threading.local()


def _tracer(pm: pluggy.PluginManager) -> None:
    """Time every ``pm.hook.<name>(...)`` call through pluggy's monitoring. The start times
    live on a per-thread stack (hooks may call hooks), never in the call's kwargs."""

    def before(hook_name, hook_impls, kwargs):
        stack = getattr(_trace_local, "stack", None)
        if stack is None:
            stack = _trace_local.stack = []
        stack.append(time.perf_counter())

    def after(outcome, hook_name, hook_impls, kwargs):
        stack = getattr(_trace_local, "stack", None) or []
        t0 = stack.pop() if stack else None
        ms = (time.perf_counter() - t0) * 1000 if t0 is not None else -1.0
        trace(hook_name, [i.plugin_name for i in hook_impls], ms, outcome.exception)

    pm.add_hookcall_monitoring(before, after)


def build_plugin_manager(load: str | None = None) -> pluggy.PluginManager:
    """Build a fresh manager. ``load`` overrides ``KB_LOAD_PLUGINS`` (tests use it)."""
    from importlib import metadata  # reading every distribution's entry points: only once hooks are needed

    pm = pluggy.PluginManager(PROJECT)
    pm.add_hookspecs(specs)
    errors: list[dict] = []
    allowed = load if load is not None else os.environ.get("KB_LOAD_PLUGINS")
    allowed_set = {a.strip() for a in allowed.split(",") if a.strip()} if allowed else None
    for ep in metadata.entry_points(group=PROJECT):
        if allowed_set is not None and ep.name not in allowed_set:
            continue
        if pm.get_plugin(ep.name) is not None:
            continue
        try:
            plugin = ep.load()
            pm.register(plugin, name=ep.name)
            pm._kb_entry_points = getattr(pm, "_kb_entry_points", {})  # name -> entry point
            pm._kb_entry_points[ep.name] = ep  # its distribution is read when listed: parsing metadata costs
        except Exception as exc:  # a broken plugin is named, and the rest still loads
            log.error("plugin %s failed to load: %s", ep.name, exc)
            errors.append({"name": ep.name, "error": f"{type(exc).__name__}: {exc}"})
    for modname in DEFAULT_PLUGINS:
        mod = importlib.import_module(modname)
        pm.register(mod, name=modname)
    pm._kb_load_errors = errors
    if tracing():
        _tracer(pm)
    return pm


def get_plugin_manager() -> pluggy.PluginManager:
    global _pm
    with _lock:
        if _pm is None:
            _pm = build_plugin_manager()
        return _pm


def reset_plugin_manager(pm: pluggy.PluginManager | None = None) -> None:
    """Swap the process-wide manager (tests, or after installing a plugin)."""
    global _pm
    with _lock:
        _pm = pm
        if pm is not None:
            pm.__dict__.pop("_kb_lookups", None)  # a plugin may have been registered into it


def lookup_cache(pm: pluggy.PluginManager) -> dict:
    """A dict on the manager for lookups derived from its plugins (the registry's), emptied
    whenever the manager is (re)installed with ``reset_plugin_manager``."""
    return pm.__dict__.setdefault("_kb_lookups", {})


def list_plugins(pm: pluggy.PluginManager | None = None) -> list[dict]:
    pm = pm or get_plugin_manager()
    eps = getattr(pm, "_kb_entry_points", {})
    out = []
    for name, plugin in pm.list_name_plugin():
        hooks = sorted(h.name for h in pm.get_hookcallers(plugin) or [])
        dist, version = _distribution(eps[name]) if name in eps else ("kbframework (built-in)", _host_version())
        out.append({"name": name, "distribution": dist, "version": version, "hooks": hooks,
                    "builtin": name in DEFAULT_PLUGINS})
    for err in getattr(pm, "_kb_load_errors", []):
        out.append({"name": err["name"], "distribution": None, "version": None, "hooks": [],
                    "builtin": False, "error": err["error"]})
    return out


def _distribution(ep) -> tuple[str, str]:
    dist = ep.dist
    return (dist.name, dist.version) if dist else (ep.value, "?")


def _host_version() -> str:
    from kbframework import __version__

    return __version__


def collect_named(pm, hook_results_by_plugin, what: str) -> dict:
    """Key objects by ``.name``; a duplicate is a StartupError naming both plugins."""
    out: dict = {}
    owners: dict = {}
    for plugin_name, items in hook_results_by_plugin:
        for obj in items or []:
            name = obj.name
            if name in out:
                raise StartupError(
                    f"Two plugins claim the {what} '{name}': '{owners[name]}' and '{plugin_name}'. "
                    f"Uninstall one of them or restrict loading with KB_LOAD_PLUGINS.",
                    code="duplicate_" + what.replace(" ", "_"))
            out[name] = obj
            owners[name] = plugin_name
    return out


def _call_impl(impl, kwargs: dict):
    return impl.function(**{k: v for k, v in kwargs.items() if k in impl.argnames})


def call_per_plugin(pm, hook_name: str, **kwargs):
    """Call a hook implementation by implementation, keeping who returned what.

    Used for the hooks collected once at start-up (source types, presets, providers,
    blueprints): an implementation that raises stops start-up with a ``StartupError``
    naming the plugin, never an anonymous traceback."""
    hook = getattr(pm.hook, hook_name)
    results = []
    for impl in reversed(hook.get_hookimpls()):  # registration order, built-ins last
        t0 = time.perf_counter()
        try:
            res = _call_impl(impl, kwargs)
        except Exception as exc:
            if tracing():
                trace(hook_name, [impl.plugin_name], (time.perf_counter() - t0) * 1000, exc)
            log.error("plugin %s failed in %s: %s: %s", impl.plugin_name, hook_name, type(exc).__name__, exc)
            raise StartupError(
                f"The plugin '{impl.plugin_name}' failed in {hook_name}: {type(exc).__name__}: {exc}. "
                f"Fix or uninstall it, or leave it out with KB_LOAD_PLUGINS.",
                code="plugin_failed", details={"plugin": impl.plugin_name, "hook": hook_name}) from exc
        if tracing():
            trace(hook_name, [impl.plugin_name], (time.perf_counter() - t0) * 1000)
        results.append((impl.plugin_name, res))
    return results


def call_first(pm, hook_name: str, **kwargs):
    """A firstresult hook, tolerant of broken plugins: implementations are tried in pluggy's
    order (installed plugins before the built-ins); one that raises is logged with its name
    and skipped, so the next one (in the end the built-in) answers. Returns the first
    non-None result, or None."""
    hook = getattr(pm.hook, hook_name)
    for impl in reversed(hook.get_hookimpls()):  # the order pluggy itself calls them in
        t0 = time.perf_counter()
        try:
            res = _call_impl(impl, kwargs)
        except Exception as exc:
            if tracing():
                trace(hook_name, [impl.plugin_name], (time.perf_counter() - t0) * 1000, exc)
            log.error("plugin %s failed in %s (skipped): %s: %s", impl.plugin_name, hook_name,
                      type(exc).__name__, exc)
            continue
        if tracing():
            trace(hook_name, [impl.plugin_name], (time.perf_counter() - t0) * 1000)
        if res is not None:
            return res
    return None
