"""Regular expressions compiled when first used, not when their module is imported.

The rule tables of retrieval (time phrases, follow-up cues) hold dozens of large patterns and
most questions need only a few of them: the time-phrase parser skips every rule whose
keywords the question lacks. Compiling them all at import cost a one-question ``kbf ask``
more than answering did; a long-running server pays for each pattern once either way.
"""
from __future__ import annotations

import re

_METHODS = ("search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split")


class OnUse:
    """Stands in for ``re.compile(pattern, flags)``. ``pattern`` and ``flags`` are readable
    without compiling (a table may build a larger pattern from them); the first other use
    compiles, and the compiled pattern's methods then answer directly."""

    def __init__(self, pattern: str, flags: int = 0):
        self.pattern = pattern
        self.flags = flags
        self._compiled: re.Pattern | None = None

    def compiled(self) -> re.Pattern:
        if self._compiled is None:
            compiled = re.compile(self.pattern, self.flags)
            for name in _METHODS:  # later calls skip __getattr__
                setattr(self, name, getattr(compiled, name))
            self._compiled = compiled
        return self._compiled

    def __getattr__(self, name: str):
        if name.startswith("__") or name == "_compiled":
            raise AttributeError(name)
        return getattr(self.compiled(), name)

    def __repr__(self) -> str:
        return f"compile_on_use({self.pattern!r}, {self.flags!r})"


def compile_on_use(pattern: str, flags: int = 0) -> OnUse:
    return OnUse(pattern, flags)
