"""Every organization setting, declared once: its name, type, default, range, help text and
who may change it. The CLI (``kbf org set``), the admin settings form, the admin API's
validation and the settings table in the README are all drawn from this list, so a setting
added here is settable, validated and documented everywhere at once.

A setting is stored in a column of the ``settings`` table named like the setting (the
organization's time zone lives on the organization). Who may change it:

- ``admin``: an organization admin (panel, API) and the operator (CLI);
- ``operator``: only the operator, through ``kbf org set`` — unless the operator delegates it
  to the organization's admins by setting the environment variable named in ``delegate_env``
  to ``1``; the admin panel shows such a setting read-only otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

TYPES = ("str", "text", "int", "float", "bool", "choice", "json", "list", "time", "timezone", "color", "url")


@dataclass(frozen=True)
class Declared:
    name: str
    type: str
    default: Any
    help: str
    label: str
    group: str
    min: float | None = None
    max: float | None = None
    max_length: int | None = None
    choices: tuple | Callable[[], tuple] | None = None
    nullable: bool = False  # None (empty) means "not set: use the default behaviour"
    who: str = "admin"  # admin | operator
    delegate_env: str | None = None  # operator-only settings an operator may hand to admins
    reindex: bool = False  # changing it re-indexes the organization's documents
    stored_on: str = "settings"  # settings | organization
    extra_path: tuple = ()  # where the old free-form settings.extra held it (for the migration)
    check: Callable[[Any], None] | None = None  # raises ValueError for a value of the right type but wrong shape
    admin_guard: Callable[[Any], None] | None = None  # raises Forbidden when an admin may not set this value
    refused_code: str = "operator_setting"  # the error code when an admin may not change it at all

    def __post_init__(self):
        assert self.type in TYPES, self.type
        assert self.who in ("admin", "operator"), self.who

    def choice_values(self) -> tuple:
        c = self.choices
        return tuple(c() if callable(c) else (c or ()))

    def range_text(self) -> str:
        if self.type == "bool":
            return "true / false"
        if self.type == "choice":
            vals = self.choice_values() if not callable(self.choices) else ()
            return " / ".join(str(v) for v in vals) if vals else "an installed name"
        if self.type in ("int", "float") and (self.min is not None or self.max is not None):
            lo = "" if self.min is None else f"{self.min:g}"
            hi = "" if self.max is None else f"{self.max:g}"
            return f"{lo}–{hi}" if hi else f"≥ {lo}"
        if self.type == "time":
            return "HH:MM"
        if self.type == "timezone":
            return "an IANA time zone"
        if self.type == "color":
            return "#rrggbb"
        if self.type == "url":
            return "https://… or /path"
        if self.type == "json":
            return "a JSON object"
        if self.type == "list":
            return "names, one per line or comma-separated"
        if self.max_length:
            return f"up to {self.max_length:,} characters"
        return ""


def _presets() -> tuple:
    from kbframework.hooks import registry

    return tuple(sorted(registry.presets()))


def _embedders() -> tuple:
    from kbframework.hooks import registry

    return tuple(sorted(p.name for p in registry.embedding_providers()))


def _check_chunking(v: dict) -> None:
    keys = ("min_tokens", "max_tokens", "overlap_min", "overlap_max")
    bad = [k for k in v if k not in keys]
    if bad:
        raise ValueError(f"knows only {', '.join(keys)} (not {', '.join(bad)})")
    for k, n in v.items():
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= 8000:
            raise ValueError(f"{k} must be a whole number of tokens between 0 and 8000")
    lo, hi = v.get("min_tokens", 500), v.get("max_tokens", 800)
    if lo > hi:
        raise ValueError("min_tokens must not exceed max_tokens")


def _check_synonyms(v: dict) -> None:
    for k, w in v.items():
        if not (isinstance(w, str) or (isinstance(w, list) and all(isinstance(x, str) for x in w))):
            raise ValueError(f"for '{k}' must be a word or a list of words")


def _check_prices(v: dict) -> None:
    for model, p in v.items():
        if not (isinstance(p, list) and len(p) == 2 and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                            and x >= 0 for x in p)):
            raise ValueError(f"for '{model}' must be [USD per million tokens in, out], e.g. [0.15, 0.6]")


def _private_network_guard(value) -> None:
    """Delegated or not, an organization cannot open what the operator keeps closed."""
    if value is True:
        from kbframework.errors import Forbidden
        from kbframework.net import operator_policy

        if not operator_policy().permits_private:
            raise Forbidden("The operator of this instance does not allow private network addresses "
                            "(KB_ALLOW_PRIVATE_NETWORK is off).", code="private_network_not_allowed")


SETTINGS: tuple[Declared, ...] = (
    # ---------------------------------------------------------------- assistant
    Declared("preset", "choice", "support", "The system prompt preset: mode, wording, role priority.",
             "Preset", "assistant", choices=_presets),
    Declared("brand", "str", None, "Fills {brand} in the prompt. Empty: the organization name.",
             "Brand name", "assistant", max_length=200, nullable=True),
    Declared("system_prompt", "text", None, "The assistant's wording. Empty: the preset's wording. The rules "
             "against inventing prices, dates and links are always added.", "Wording (system prompt)",
             "assistant", max_length=20000, nullable=True),
    Declared("mode", "str", None, "Answer mode override (recommendation, support, search). Empty: the preset's.",
             "Mode", "assistant", max_length=30, nullable=True),
    Declared("response_style", "str", None, "A free word on tone passed to the prompt (e.g. concise).",
             "Response style", "assistant", max_length=50, nullable=True),
    Declared("fallback_text", "str", None, "What the assistant says when nothing is found. Empty: the preset's.",
             "When nothing is found, say", "assistant", max_length=1000, nullable=True,
             extra_path=("fallback_text",)),
    Declared("knowledge", "choice", None, "strict: answer only from the knowledge base; general: may add "
             "general knowledge. Empty: the preset's.", "Knowledge", "assistant", choices=("strict", "general"),
             nullable=True, extra_path=("knowledge",)),
    # ---------------------------------------------------------------- retrieval
    Declared("retrieval_limit", "int", 6, "Passages per answer. More context, longer (and costlier) answers.",
             "Passages per answer", "retrieval", min=1, max=20),
    Declared("similarity_floor", "float", 0.2, "Passages less similar than this are ignored by the meaning "
             "search.", "Similarity floor", "retrieval", min=-1.0, max=1.0),
    Declared("history_window", "int", 6, "How many earlier messages follow-up questions see.",
             "Messages remembered", "retrieval", min=0, max=20),
    Declared("char_budget", "int", 18000, "Characters of context shared by the passages of one answer.",
             "Context size (characters)", "retrieval", min=1000, max=200000, extra_path=("char_budget",)),
    Declared("timezone", "timezone", "UTC", "“Tonight” and “this weekend” are read in this zone; the month "
             "of a budget too.", "Time zone", "retrieval", stored_on="organization"),
    Declared("night_cutoff", "time", "05:00", "Until then, “tonight” still means the night before.",
             "Night ends at", "retrieval"),
    Declared("weekend_starts_friday", "bool", False, "“This weekend” starts on Friday 18:00.",
             "Weekend starts Friday evening", "retrieval", extra_path=("weekend_starts_friday",)),
    Declared("place_names", "list", [], "Places the assistant should recognise in questions besides the "
             "built-in list of large cities (towns, districts, venues you have no documents for).",
             "Place names", "retrieval", extra_path=("place_names",)),
    Declared("answer_threshold", "float", None, "How sure the answerability gate must be before the assistant "
             "answers (higher: more “I don't know”). Empty: the calibrated default.", "Answer threshold",
             "retrieval", min=-3.0, max=3.0, nullable=True, extra_path=("answer_threshold",)),
    Declared("synonyms", "json", {}, "Words that mean the same for the answerability gate's overlap: "
             "{\"word\": \"other\"} or {\"word\": [\"a\", \"b\"]}.", "Synonyms", "retrieval",
             extra_path=("synonyms",), check=_check_synonyms),
    Declared("query_planner", "bool", True, "With an LLM configured, one small call reads filters (price, "
             "category, city…) the rules miss.", "LLM query planner", "retrieval",
             extra_path=("query_planner",)),
    Declared("planner_timeout", "float", 8.0, "Seconds an answer waits for the query planner.",
             "Planner timeout (s)", "retrieval", min=0.5, max=60, extra_path=("planner_timeout",)),
    # ---------------------------------------------------------------- indexing
    Declared("chunking", "json", {}, "Chunk sizes in tokens: {min_tokens, max_tokens, overlap_min, "
             "overlap_max}. Changing it re-indexes everything.", "Chunking", "indexing", reindex=True,
             extra_path=("chunking",), check=_check_chunking),
    Declared("embedding_provider", "choice", None, "The embedding model for this organization. Empty: the "
             "server's (KB_EMBEDDING_PROVIDER). Changing it re-indexes everything.", "Embedding provider",
             "indexing", choices=_embedders, nullable=True, reindex=True, extra_path=("embedding_provider",)),
    # ---------------------------------------------------------------- widget branding
    Declared("branding_title", "str", None, "The chat widget's title. Empty: the organization name.",
             "Widget title", "branding", max_length=200, nullable=True, extra_path=("branding", "title")),
    Declared("branding_color", "color", None, "The widget's accent colour.", "Widget colour", "branding",
             nullable=True, extra_path=("branding", "color")),
    Declared("branding_logo", "url", None, "The widget's logo (a web address).", "Widget logo URL", "branding",
             max_length=2000, nullable=True, extra_path=("branding", "logo")),
    Declared("branding_welcome", "str", None, "The widget's first message.", "Welcome message", "branding",
             max_length=500, nullable=True, extra_path=("branding", "welcome")),
    # ---------------------------------------------------------------- budget
    Declared("budget_unit", "choice", "none", "What the monthly budget counts: tokens (every model call, "
             "offline models included) or cost (estimated USD; offline calls cost 0); none: no budget.",
             "Budget unit", "budget", choices=("none", "tokens", "cost")),
    Declared("budget_limit", "float", None, "The monthly budget in its unit (tokens, or USD).",
             "Monthly budget", "budget", min=0, nullable=True),
    Declared("budget_soft_pct", "int", 80, "A warning is logged and shown when this share of the budget is "
             "used.", "Soft warning at (%)", "budget", min=1, max=100, extra_path=("budget", "soft_pct")),
    Declared("budget_hard_stop", "bool", True, "At 100 % the public chat answers with a fixed message and no "
             "model is called. Off: only the warning.", "Hard stop at 100 %", "budget",
             extra_path=("budget", "hard_stop")),
    Declared("prices", "json", {}, "Model prices in USD per million tokens, {\"model\": [in, out]}, over "
             "the built-in list; they drive the cost estimate.", "Model prices", "budget",
             extra_path=("prices",), check=_check_prices),
    # ---------------------------------------------------------------- privacy
    Declared("retention_days", "int", 90, "Conversations and their feedback older than this are deleted "
             "(every night, by the scheduler).", "Keep conversations for (days)", "privacy", min=1, max=3650),
    # ---------------------------------------------------------------- network
    Declared("allow_private_network", "bool", False, "Sources may fetch from private network addresses "
             "(an intranet WordPress). Only within what the server allows (KB_ALLOW_PRIVATE_NETWORK).",
             "Allow private network sources", "network", who="operator",
             delegate_env="KB_TENANT_PRIVATE_NETWORK", extra_path=("allow_private_network",),
             admin_guard=_private_network_guard, refused_code="private_network_not_delegated"),
)

BY_NAME = {d.name: d for d in SETTINGS}
GROUPS = {"assistant": "Assistant", "retrieval": "Retrieval and conversation", "indexing": "Indexing",
          "branding": "Chat widget branding", "budget": "Monthly budget", "privacy": "Visitors' privacy",
          "network": "Network access"}


def declared(name: str) -> Declared:
    from kbframework.errors import ValidationFailed

    d = BY_NAME.get(name)
    if d is None:
        raise ValidationFailed(f"Unknown setting '{name}'. Known: {', '.join(BY_NAME)}.",
                               code="unknown_setting")
    return d


def markdown_table() -> str:
    """The settings table of the README (a meta-test keeps the two equal)."""
    rows = ["| Setting | Type | Default | Range | Who may change it | What it does |",
            "|---|---|---|---|---|---|"]
    for d in SETTINGS:
        default = "empty" if d.default in (None, {}) else str(d.default).lower() if d.type == "bool" else str(d.default)
        who = "admin" if d.who == "admin" else (f"operator (admins when `{d.delegate_env}=1`)"
                                               if d.delegate_env else "operator")
        rows.append(f"| `{d.name}` | {d.type} | {default} | {d.range_text()} | {who} | {d.help.replace('|', '/')} |")
    return "\n".join(rows)

