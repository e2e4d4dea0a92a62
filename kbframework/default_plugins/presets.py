"""The neutral preset the host falls back to when no preset distribution is installed."""
from kbframework.hooks.markers import hookimpl

DEFAULT_PROMPT = (
    "You are the assistant of {brand}. Answer using only the numbered context passages. "
    "If the answer is not in the context, say you don't have that information. Never invent "
    "facts, prices, dates, links or policies. Cite passages as [n]. Keep replies short."
)


@hookimpl(trylast=True)
def kb_mode_presets():
    from kbframework.types import Preset

    return [Preset(name="default", mode="search", label="Neutral (built-in)",
                   prompt_template=DEFAULT_PROMPT, role_priority=[])]
