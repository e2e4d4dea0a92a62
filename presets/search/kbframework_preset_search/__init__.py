"""The "search" preset (§9): the neutral site search preset (mode search, no role boost)."""
from kbframework import hookimpl

from kbframework_preset_search.preset import PRESET


@hookimpl
def kb_mode_presets():
    return [PRESET]
