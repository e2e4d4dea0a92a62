"""kbframework-woocommerce: hook implementations only; the work is in connector.py
(REST sync, webhooks), normalize.py (product → document), schema.py (config) and
webhooks.py (signatures)."""
from kbframework import hookimpl

from kbframework_woocommerce.connector import WooCommerceConnector


@hookimpl
def kb_source_types():
    return [WooCommerceConnector()]
