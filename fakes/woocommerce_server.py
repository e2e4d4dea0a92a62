"""The fake WooCommerce store's first address, kept for the tests and benchmarks that import
it from here; the store lives in the package ``fakes.woocommerce``."""
from fakes.woocommerce import (DEFAULT_CONSUMER_KEY, DEFAULT_CONSUMER_SECRET, WC_NAMESPACE, FakeWooStore, Request,
                               php_json_encode, slugify, wpautop)

__all__ = ["DEFAULT_CONSUMER_KEY", "DEFAULT_CONSUMER_SECRET", "FakeWooStore", "Request", "WC_NAMESPACE",
           "php_json_encode", "slugify", "wpautop"]
