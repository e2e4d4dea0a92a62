"""kbframework-ics: hook implementations only; the work is in connector.py (fetch, normalize),
calendar.py (iCalendar parsing and recurrence expansion) and schema.py (the source config)."""
from kbframework import hookimpl

from kbframework_ics.connector import IcsConnector


@hookimpl
def kb_source_types():
    return [IcsConnector()]
