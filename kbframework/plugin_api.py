"""Everything a plugin may use from the host, and nothing else.

A plugin imports these names from ``kbframework`` (or from here) and never another host
module, so the host can move and change its internals without breaking a plugin; a test
fails when a file under ``plugins/`` or ``presets/`` imports anything else. Each name is
imported on first use, so a plugin that only needs ``hookimpl`` loads nothing heavy.
"""
from __future__ import annotations

import importlib

#: public name -> (host module, name in it)
EXPORTS = {
    # hook implementations
    "hookimpl": ("kbframework.hooks.markers", "hookimpl"),
    # the plain dataclasses and base classes plugins see
    "DOCUMENT_ROLES": ("kbframework.types", "DOCUMENT_ROLES"),
    "Card": ("kbframework.types", "Card"),
    "DocumentDraft": ("kbframework.types", "DocumentDraft"),
    "EmbeddingProvider": ("kbframework.types", "EmbeddingProvider"),
    "LLMProvider": ("kbframework.types", "LLMProvider"),
    "FilterPart": ("kbframework.types", "FilterPart"),
    "LLMResult": ("kbframework.types", "LLMResult"),
    "NothingToFetch": ("kbframework.types", "NothingToFetch"),
    "Preset": ("kbframework.types", "Preset"),
    "RawRecord": ("kbframework.types", "RawRecord"),
    "Segment": ("kbframework.types", "Segment"),
    "SourceConnector": ("kbframework.types", "SourceConnector"),
    "SyncContext": ("kbframework.types", "SyncContext"),
    # typed errors, turned into clear messages at the edges
    "KBError": ("kbframework.errors", "KBError"),
    "ConnectorAuthError": ("kbframework.errors", "ConnectorAuthError"),
    "Forbidden": ("kbframework.errors", "Forbidden"),
    "NotFound": ("kbframework.errors", "NotFound"),
    "SourceUnavailable": ("kbframework.errors", "SourceUnavailable"),
    "StartupError": ("kbframework.errors", "StartupError"),
    "ValidationFailed": ("kbframework.errors", "ValidationFailed"),
    # the safe HTTP session (private networks blocked unless allowed, size and time caps)
    "BlockedAddress": ("kbframework.addresses", "BlockedAddress"),
    "PerThreadSessions": ("kbframework.net", "PerThreadSessions"),
    "ResponseTooLarge": ("kbframework.net", "ResponseTooLarge"),
    "SafeSession": ("kbframework.net", "SafeSession"),
    "safe_get": ("kbframework.net", "safe_get"),
    # HTML to structured text
    "html_to_text": ("kbframework.text.html", "html_to_text"),
    "main_content": ("kbframework.text.html", "main_content"),
    # field-mapping readers registered with kb_field_mappers
    "NO_READER": ("kbframework.hooks.registry", "NO_READER"),
    "read_mapped_path": ("kbframework.hooks.registry", "read_mapped_path"),
    # the instance configuration (a plugin reads its own values)
    "get_config": ("kbframework.config", "get_config"),
    # routes a plugin adds in kb_register_blueprints: admins only, CSRF-checked
    "admin_required": ("kbframework.web.auth", "admin_required"),
    # a remote site connected by pasting one code (a companion plugin on that site): the
    # host keeps the codes, the source, the website key and the nonces; the plugin its protocol
    "ConnectCodeInvalid": ("kbframework.sources.connections", "ConnectCodeInvalid"),
    "new_connect_code": ("kbframework.sources.connections", "new_connect_code"),
    "check_connect_rate": ("kbframework.sources.connections", "check_connect_rate"),
    "take_connect_code": ("kbframework.sources.connections", "take_connect_code"),
    "organization_context": ("kbframework.sources.connections", "organization_context"),
    "connect_site": ("kbframework.sources.connections", "connect_site"),
    "connected_sites": ("kbframework.sources.connections", "connected_sites"),
    "disconnect_site": ("kbframework.sources.connections", "disconnect_site"),
    "first_use_of_nonce": ("kbframework.sources.connections", "first_use_of_nonce"),
    "widget_settings": ("kbframework.web.embed_security", "widget_settings"),
}

__all__ = sorted(EXPORTS)


def __getattr__(name: str):
    try:
        module, attr = EXPORTS[name]
    except KeyError:
        raise AttributeError(f"kbframework.plugin_api has no '{name}'") from None
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__():
    return __all__
