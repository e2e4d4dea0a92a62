"""Typed lookups over the plugin manager: source types, presets, providers.

Collected once per plugin manager and cached on it, so swapping the manager
(``reset_plugin_manager``) starts with fresh lookups and the manager never calls back here.
"""
from __future__ import annotations

import functools
from typing import Callable

from kbframework.config import get_config
from kbframework.errors import KBError, StartupError
from kbframework.hooks.manager import call_per_plugin, collect_named, get_plugin_manager, lookup_cache


def _per_manager(fn: Callable) -> Callable:
    """Compute ``fn()`` once per plugin manager; the result lives on the manager itself."""

    @functools.wraps(fn)
    def cached():
        cache = lookup_cache(get_plugin_manager())
        if fn.__name__ not in cache:
            cache[fn.__name__] = fn()
        return cache[fn.__name__]

    return cached


def clear_caches() -> None:
    """Collect again from the current manager (after a test registers a plugin into it)."""
    lookup_cache(get_plugin_manager()).clear()


@_per_manager
def field_mappers() -> dict:
    """{name: reader(payload, path)} from every ``kb_field_mappers``; a name claimed twice is
    a StartupError naming both plugins. Connectors resolve mapping paths written
    ``name:rest`` with the reader registered under ``name`` (see ``read_mapped_path``)."""
    pm = get_plugin_manager()
    out: dict = {}
    owners: dict = {}
    for plugin, readers in call_per_plugin(pm, "kb_field_mappers"):
        for name, fn in (readers or {}).items():
            if name in out:
                raise StartupError(f"Two plugins claim the field mapper '{name}': '{owners[name]}' and "
                                   f"'{plugin}'.", code="duplicate_field_mapper")
            out[name], owners[name] = fn, plugin
    return out


NO_READER = object()


def read_mapped_path(payload: dict, path: str):
    """A ``name:rest`` mapping path read by the plugin reader ``name``; ``NO_READER`` when the
    path has no such prefix (the connector then reads it itself)."""
    name, sep, rest = path.partition(":")
    if not sep or not name.isidentifier():
        return NO_READER
    reader = field_mappers().get(name)
    if reader is None:
        return NO_READER
    return reader(payload, rest)


@_per_manager
def source_types() -> dict:
    """{name: connector}; every connector subclasses ``SourceConnector``, so the host reads its
    optional features as attributes and never needs to know which connector it is."""
    from kbframework.types import SourceConnector

    pm = get_plugin_manager()
    results = call_per_plugin(pm, "kb_source_types")
    for plugin, items in results:
        for obj in items or []:
            if not isinstance(obj, SourceConnector):
                raise StartupError(f"The plugin '{plugin}' returned {type(obj).__name__} from kb_source_types; a "
                                   f"connector must subclass kbframework.SourceConnector.", code="bad_connector")
    return collect_named(pm, results, "source type")


@_per_manager
def presets() -> dict:
    pm = get_plugin_manager()
    return collect_named(pm, call_per_plugin(pm, "kb_mode_presets"), "preset")


@_per_manager
def embedding_providers() -> list:
    from kbframework.types import EmbeddingProvider

    return _providers("kb_embedding_providers", EmbeddingProvider)


@_per_manager
def llm_providers() -> list:
    from kbframework.types import LLMProvider

    return _providers("kb_llm_providers", LLMProvider)


def _providers(hook_name: str, base: type) -> list:
    """Every provider from ``hook_name``; each subclasses ``base``, so its capabilities
    (``is_offline``, ``needs_key``, ...) are attributes the host reads."""
    out = []
    for plugin, items in call_per_plugin(get_plugin_manager(), hook_name):
        for obj in items or []:
            if not isinstance(obj, base):
                raise StartupError(f"The plugin '{plugin}' returned {type(obj).__name__} from {hook_name}; a "
                                   f"provider must subclass kbframework.{base.__name__}.", code="bad_provider")
            out.append(obj)
    return out


def validate_startup() -> None:
    """Fail start-up early and clearly: duplicate names, unknown configured providers."""
    source_types()
    presets()
    embedder()


def source_type(name: str):
    st = source_types().get(name)
    if st is None:
        raise KBError(f"Unknown source type '{name}'. Installed: {', '.join(sorted(source_types())) or 'none'}.",
                      code="unknown_source_type")
    return st


def editor_source_type():
    """The source type whose documents the admin's knowledge editor writes (``edited_in_admin``),
    or None when none is installed."""
    return next((c for c in source_types().values() if c.edited_in_admin), None)


def preset(name: str | None):
    all_ = presets()
    if name and name in all_:
        return all_[name]
    return all_.get("default") or next(iter(all_.values()))


def embedder(name: str | None = None):
    """The active embedding provider (``KB_EMBEDDING_PROVIDER``, default wordllama)."""
    name = name or get_config().embedding_provider
    for p in embedding_providers():
        if p.name == name:
            return p
    raise StartupError(f"KB_EMBEDDING_PROVIDER={name!r} is not an installed embedding provider "
                       f"({', '.join(p.name for p in embedding_providers())}).")


def embedder_for_model(model: str):
    for p in embedding_providers():
        if p.model == model:
            return p
    return None


def llm(name: str | None = None):
    """The active LLM: ``KB_LLM_PROVIDER`` or, on ``auto``, OpenAI-compatible when a key or
    base URL is set, else the offline extractive answerer."""
    name = name or get_config().llm_provider
    providers = llm_providers()
    if name == "auto":
        for p in providers:
            if not p.is_offline and p.available():
                return p
        fallback = fallback_llm()
        if fallback is not None:
            return fallback
    for p in providers:
        if p.name == name:
            return p
    raise StartupError(f"KB_LLM_PROVIDER={name!r} is not an installed LLM provider.")


def fallback_llm():
    """The offline answerer used when no model is configured or the configured one fails."""
    return next((p for p in llm_providers() if p.is_offline), None)


def offline_provider_names() -> set[str]:
    """Names of the installed providers that run here and cost nothing (the ledger's rows of
    these never count against a budget)."""
    return {p.name for p in [*embedding_providers(), *llm_providers()] if p.is_offline}
