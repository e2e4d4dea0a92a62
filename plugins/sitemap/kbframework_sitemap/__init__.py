"""kbframework-sitemap: hook implementations only; the work is in connector.py, schema.py and
sitemap.py."""
from kbframework import hookimpl


@hookimpl
def kb_source_types():
    from kbframework_sitemap.connector import SitemapConnector

    return [SitemapConnector()]
