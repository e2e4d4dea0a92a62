"""kbframework-wordpress: hook implementations only; the work is in connector.py, client.py,
mapping.py, schema.py and webhook.py; the companion WordPress plugin's connection in
companion.py and companion_api.py."""
from kbframework import hookimpl


@hookimpl
def kb_source_types():
    from kbframework_wordpress.connector import WordPressConnector

    return [WordPressConnector()]


@hookimpl
def kb_register_blueprints(app):
    from kbframework_wordpress.companion_api import admin_api_bp, admin_page_bp, public_bp

    for blueprint in (public_bp, admin_api_bp, admin_page_bp):
        if blueprint.name not in app.blueprints:
            app.register_blueprint(blueprint)
