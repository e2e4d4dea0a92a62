"""Hook specifications: everything a connector, preset or provider does, the host reaches here.

Implementations may accept fewer arguments than a spec lists, so specs can grow.
"""
from __future__ import annotations

from kbframework.hooks.markers import hookspec

# --------------------------------------------------------------------------- sources


@hookspec
def kb_source_types():
    """Return a list of connector objects (see ``kbframework.types.SourceConnector``).

    All results are collected and keyed by ``connector.name``; two plugins claiming one
    name stop start-up with a ``StartupError`` naming both plugins.
    """


@hookspec
def kb_field_mappers():
    """Return a dict ``{name: callable(record_payload, path) -> value}`` of field-path readers.

    All results are merged; later plugins may not silently replace an existing name.
    """


@hookspec(firstresult=True)
def kb_normalize(record, mapping, source_type, context):
    """Turn one ``RawRecord`` into a ``DocumentDraft``; firstresult: the first non-None wins.

    The host calls the connector's own ``normalize`` when no plugin answers.
    """


# --------------------------------------------------------------------------- retrieval


@hookspec
def kb_extract_filters(query, context):
    """Return a list of ``FilterPart`` found in ``query``.

    ``context`` is a dict with ``now`` (aware datetime), ``timezone``, ``night_cutoff``,
    ``vocabulary`` (the organization's categories, tags, cities, venues) and ``settings``.
    All results are merged by the host; every part is logged with its extractor's name.
    """


@hookspec(firstresult=True)
def kb_build_card(document, preset):
    """Return a ``Card`` for a retrieved document (a dict of its columns); firstresult."""


@hookspec
def kb_mode_presets():
    """Return a list of ``Preset`` objects; all are collected and keyed by ``preset.name``."""


# --------------------------------------------------------------------------- models


@hookspec
def kb_embedding_providers():
    """Return a list of embedding providers; the active one is chosen by settings."""


@hookspec
def kb_llm_providers():
    """Return a list of LLM providers; the active one is chosen by settings."""


# --------------------------------------------------------------------------- web


@hookspec
def kb_register_blueprints(app):
    """Register Flask blueprints (webhook receivers, plugin pages); return nothing."""


# --------------------------------------------------------------------------- command line


@hookspec
def kb_register_commands(cli):
    """Add commands to ``kbf`` (a click group): ``@cli.command()`` or ``cli.add_command(...)``;
    return nothing. Every implementation is called once when ``kbf`` starts."""
