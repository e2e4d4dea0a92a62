"""Organization settings, declared once (``declared.SETTINGS``) and changed through one
function (``store.apply``) by the admin form, the admin API and ``kbf org set``."""
from kbframework.settings.declared import BY_NAME, GROUPS, SETTINGS, Declared, declared, markdown_table
from kbframework.settings.store import admin_may_change, apply, coerce, current, delegated, legacy_extra, values_of

__all__ = ["BY_NAME", "GROUPS", "SETTINGS", "Declared", "declared", "markdown_table", "admin_may_change", "apply",
           "coerce", "current", "delegated", "legacy_extra", "values_of"]
