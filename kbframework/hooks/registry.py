"""Typed lookups over the plugin manager: source types, presets, providers.

Collected once per process and cached; ``reset_plugin_manager`` clears the caches.
"""
from __future__ import annotations

import functools

from kbframework.config import get_config
from kbframework.errors import KBError, StartupError
from kbframework.hooks.manager import call_per_plugin, collect_named, get_plugin_manager


def clear_caches() -> None:
    for fn in (source_types, presets, embedding_providers, llm_providers, field_mappers):
        fn.cache_clear()


@functools.lru_cache(maxsize=1)
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


_NO_READER = object()


def read_mapped_path(payload: dict, path: str):
    """A ``name:rest`` mapping path read by the plugin reader ``name``; ``_NO_READER`` when the
    path has no such prefix (the connector then reads it itself)."""
    name, sep, rest = path.partition(":")
    if not sep or not name.isidentifier():
        return _NO_READER
    reader = field_mappers().get(name)
    if reader is None:
        return _NO_READER
    return reader(payload, rest)


@functools.lru_cache(maxsize=1)
def source_types() -> dict:
    pm = get_plugin_manager()
    return collect_named(pm, call_per_plugin(pm, "kb_source_types"), "source type")


@functools.lru_cache(maxsize=1)
def presets() -> dict:
    pm = get_plugin_manager()
    return collect_named(pm, call_per_plugin(pm, "kb_mode_presets"), "preset")


@functools.lru_cache(maxsize=1)
def embedding_providers() -> list:
    pm = get_plugin_manager()
    out = []
    for _plugin, items in call_per_plugin(pm, "kb_embedding_providers"):
        out.extend(items or [])
    return out


@functools.lru_cache(maxsize=1)
def llm_providers() -> list:
    pm = get_plugin_manager()
    out = []
    for _plugin, items in call_per_plugin(pm, "kb_llm_providers"):
        out.extend(items or [])
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
            if p.name != "extractive" and p.available():
                return p
        name = "extractive"
    for p in providers:
        if p.name == name:
            return p
    raise StartupError(f"KB_LLM_PROVIDER={name!r} is not an installed LLM provider.")


def fallback_llm():
    for p in llm_providers():
        if p.name == "extractive":
            return p
    return None
