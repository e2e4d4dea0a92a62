"""kbframework-manual: hook implementations only; the work is in connector.py and schema.py."""
from kbframework import hookimpl


@hookimpl
def kb_source_types():
    from kbframework_manual.connector import ManualConnector

    return [ManualConnector()]
