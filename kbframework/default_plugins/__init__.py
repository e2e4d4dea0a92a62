"""The host's own behaviour, registered as plugins (trylast, so installed plugins win)."""
