"""kbframework-woocommerce: hook implementations only; the work is in connector.py
(REST sync, webhooks), normalize.py (product → document), schema.py (config) and
webhooks.py (signatures)."""
from kbframework import hookimpl


@hookimpl
def kb_source_types():
    from kbframework_woocommerce.connector import WooCommerceConnector

    return [WooCommerceConnector()]
