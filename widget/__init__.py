"""The embeddable chat widget (widget.js) and the full-page embed template (embed.html)."""
