"""The "events" preset (§9): the events concierge preset (mode events) for nightlife and venue sites."""
from kbframework import hookimpl

from kbframework_preset_events.preset import PRESET


@hookimpl
def kb_mode_presets():
    return [PRESET]
