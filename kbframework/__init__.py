"""kbframework: an organization's knowledge, copied ahead of time, answered with sources.

Plugins import what they need from here (``from kbframework import hookimpl, DocumentDraft``)
and nothing else of the host's internals: the names are those of ``kbframework.plugin_api``,
imported on first use so that ``import kbframework`` stays cheap.
"""
import os

__version__ = "0.1.0"

# numpy's OpenBLAS runs a matrix-vector product on a thread per core. In a process whose request
# threads share the cores with PostgreSQL's backends those threads wait on each other: the query
# expansion's product with the 9,000 × 256 token table took 8 ms instead of 0.5 ms on two busy
# cores. One thread gives the same results bit for bit (a row's dot product is one thread's
# either way); an operator's own setting wins, and it takes effect only when numpy is imported
# after kbframework (as the web process, the worker and the CLI do).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def __getattr__(name: str):
    import importlib

    plugin_api = importlib.import_module("kbframework.plugin_api")
    if name in plugin_api.EXPORTS:
        return getattr(plugin_api, name)
    raise AttributeError(f"module 'kbframework' has no attribute '{name}'")
