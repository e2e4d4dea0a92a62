"""The "search" preset: the neutral site search preset (mode search, no role boost)."""
from kbframework import hookimpl


@hookimpl
def kb_mode_presets():
    from kbframework_preset_search.preset import PRESET

    return [PRESET]
