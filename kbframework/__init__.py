"""kbframework: an organization's knowledge, copied ahead of time, answered with sources.

Plugins import ``hookimpl`` from here and nothing else of the host's internals.
"""
from kbframework.hooks.markers import hookimpl  # noqa: F401

__version__ = "0.1.0"
