"""kbframework-pdf: hook implementations only; the work is in extract.py, connector.py, routes.py."""
from kbframework import hookimpl

from kbframework_pdf.connector import PdfConnector


@hookimpl
def kb_source_types():
    return [PdfConnector()]


@hookimpl
def kb_register_blueprints(app):
    from kbframework_pdf.routes import bp

    app.register_blueprint(bp)
