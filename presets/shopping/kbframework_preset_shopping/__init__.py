"""The "shopping" preset: the shopping assistant preset (mode recommendation) for WooCommerce shops."""
from kbframework import hookimpl


@hookimpl
def kb_mode_presets():
    from kbframework_preset_shopping.preset import PRESET

    return [PRESET]
