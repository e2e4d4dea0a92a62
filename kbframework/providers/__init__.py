"""Model providers shipped with the host (registered through the same hooks as plugins)."""
