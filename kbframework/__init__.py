"""kbframework: an organization's knowledge, copied ahead of time, answered with sources.

Plugins import what they need from here (``from kbframework import hookimpl, DocumentDraft``)
and nothing else of the host's internals: the names are those of ``kbframework.plugin_api``,
imported on first use so that ``import kbframework`` stays cheap.
"""
__version__ = "0.1.0"


def __getattr__(name: str):
    import importlib

    plugin_api = importlib.import_module("kbframework.plugin_api")
    if name in plugin_api.EXPORTS:
        return getattr(plugin_api, name)
    raise AttributeError(f"module 'kbframework' has no attribute '{name}'")
