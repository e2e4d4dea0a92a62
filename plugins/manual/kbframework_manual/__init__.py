"""kbframework-manual: hook implementations only; the work is in connector.py and schema.py."""
from kbframework import hookimpl

from kbframework_manual.connector import ManualConnector


@hookimpl
def kb_source_types():
    return [ManualConnector()]
