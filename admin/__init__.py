"""The admin panel: server-rendered pages (Jinja) with a little JavaScript and no build step.

Installed as ``kbframework.admin``; ``create_app`` registers :data:`kbframework.admin.views.bp` (one module per area under ``views/``).
"""
