"""The "support" preset (§9): the support and helpdesk preset (mode support)."""
from kbframework import hookimpl

from kbframework_preset_support.preset import PRESET


@hookimpl
def kb_mode_presets():
    return [PRESET]
