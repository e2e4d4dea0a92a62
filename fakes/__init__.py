"""Local servers that speak the protocols of services unreachable from here (a merchant's
WooCommerce store, an OpenAI-compatible API, a website with sitemaps), and the driver of the
real local test WordPress (``wordpress_site.py``). The tests and ``make bench`` both use
them; nothing in the product imports them, and a bench imports no test module."""
