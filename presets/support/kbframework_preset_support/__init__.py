"""The "support" preset: the support and helpdesk preset (mode support)."""
from kbframework import hookimpl


@hookimpl
def kb_mode_presets():
    from kbframework_preset_support.preset import PRESET

    return [PRESET]
