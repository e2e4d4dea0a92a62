"""kbframework-sitemap: hook implementations only; the work is in connector.py, schema.py and
sitemap.py."""
from kbframework import hookimpl

from kbframework_sitemap.connector import SitemapConnector


@hookimpl
def kb_source_types():
    return [SitemapConnector()]
