"""kbframework-wordpress: hook implementations only; the work is in connector.py, client.py,
mapping.py, schema.py, webhook.py and api.py."""
from kbframework import hookimpl

from kbframework_wordpress.connector import WordPressConnector


@hookimpl
def kb_source_types():
    return [WordPressConnector()]


@hookimpl
def kb_register_blueprints(app):
    from kbframework_wordpress.api import bp

    if "kbf_wordpress" not in app.blueprints:
        app.register_blueprint(bp)
