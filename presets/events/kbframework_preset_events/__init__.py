"""The "events" preset: the events concierge preset (mode events) for nightlife and venue sites."""
from kbframework import hookimpl


@hookimpl
def kb_mode_presets():
    from kbframework_preset_events.preset import PRESET

    return [PRESET]
