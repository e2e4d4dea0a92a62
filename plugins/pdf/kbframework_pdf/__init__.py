"""kbframework-pdf: hook implementations only; the work is in extract.py and connector.py."""
from kbframework import hookimpl


@hookimpl
def kb_source_types():
    from kbframework_pdf.connector import PdfConnector

    return [PdfConnector()]
