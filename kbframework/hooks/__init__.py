"""pluggy hook specifications and the plugin manager (entry point group ``kbframework``)."""
from kbframework.hooks.markers import hookimpl, hookspec  # noqa: F401
