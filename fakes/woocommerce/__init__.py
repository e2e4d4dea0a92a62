"""A local HTTP server that speaks the WooCommerce REST API v3 (``/wp-json/wc/v3``).

For tests and benchmarks: an in-memory catalogue served by a threaded ``http.server``
on 127.0.0.1, in the exact JSON shape of the official docs' examples
(``shared/data/woocommerce/rest_api_v3/examples``), with WooCommerce's paging headers,
error bodies, authentication rules and webhook delivery format.

Quick use::

    with FakeWooStore.from_sample_csv(".../sample_products.csv") as store:
        store.url                      # http://127.0.0.1:<port>
        store.consumer_key, store.consumer_secret
        store.fail_next(2, status=429, retry_after=1)
        store.update(46, regular_price="39")      # bumps date_modified_gmt
        status, body = store.deliver(app_url, "product.updated", 46, secret="s3cret")

Behaviour copied from WooCommerce / WordPress (sources: woocommerce
``includes/rest-api/Controllers/Version3/class-wc-rest-crud-controller.php``,
``includes/class-wc-rest-authentication.php``, ``includes/class-wc-webhook.php``,
WordPress ``WP_REST_Request`` / ``WP_Date_Query``):

* JSON bodies are encoded like PHP's ``json_encode`` (compact, ``\\/``, ``\\uXXXX``).
* ``GET /products`` defaults: ``per_page=10`` (1..100, else 400 ``rest_invalid_param``),
  ``page=1``, ``status=any`` (everything but trash), ``orderby=date``, ``order=desc``
  (ties broken by ID). A page past the end is ``[]`` with the totals, not an error.
* ``X-WP-Total``, ``X-WP-TotalPages`` and one ``Link`` header holding
  ``<...>; rel="prev", <...>; rel="next"``. Like WooCommerce's CRUD controller, the link
  URLs repeat the request's query values *without* URL-encoding them (``add_query_arg``),
  so a ``+`` in ``modified_after=...+00:00`` becomes a space when the link is followed.
* ``modified_after``/``modified_before``/``after``/``before`` compare against the
  site-local column unless ``dates_are_gmt=true``; the value is first converted to the
  site's wall-clock time when it carries an offset (``WP_Date_Query``). So with
  ``utc_offset_hours != 0`` only two forms are right: an offset-carrying value without
  ``dates_are_gmt``, or a naive GMT value with ``dates_are_gmt=true``. Strictly after,
  whole seconds.
* Auth: ``consumer_key``/``consumer_secret`` query parameters are used first, then HTTP
  Basic. An unknown key is simply "not logged in" (401 ``woocommerce_rest_cannot_view``);
  a known key with a wrong secret is 401 ``woocommerce_rest_authentication_error``
  "Consumer secret is invalid." (plus ``WWW-Authenticate``). A ``read`` key cannot POST.
  (Real WooCommerce accepts key/secret only over HTTPS; over plain HTTP it wants OAuth
  1.0a. This fake accepts them over http.)
* ``POST /webhooks`` answers 201 with the docs' webhook JSON and, like WooCommerce,
  sends the ping (``webhook_id=N`` form body) to the delivery URL synchronously before
  answering (``ping_on_create``).
* Changing a variation bumps the parent's ``date_modified`` (WooCommerce re-saves the
  parent when it syncs prices/stock). ``delete()`` moves to trash by default (what the
  admin does, and what fires ``product.deleted``); ``delete(force=True)`` removes it.

Test controls: ``set_down``, ``fail_next``, ``delay``, ``update``, ``update_variation``,
``unpublish``, ``delete``, ``add``, ``requests``, ``webhooks``, ``deliver``, ``ping``,
``dispatch_webhooks``.

One store object, its behaviour in parts that share its state (``store.py`` sets it up):

    store.py       FakeWooStore: the constructor, the state, the clock
    server.py      the HTTP server, start/stop, outages and failures on demand, sending answers
    auth.py        consumer key and secret, the key's permissions, "not logged in" refusals
    routes.py      the routes: products, categories, variations, webhooks; ``_fields``
    queries.py     collection parameters, date filters, paging headers and links
    catalog.py     reading and changing products and variations (what a test calls)
    products.py    a product's JSON from a payload or a spec: terms, images, prices
    variations.py  variations, and the variable parent synced from them
    seeding.py     the sample CSV and ``generate(n)``
    webhooks.py    the ``/webhooks`` API and deliveries (body, signature, headers)
    wordpress.py   PHP's ``json_encode``, ``wpautop``, slugs, dates, prices
    errors.py      WordPress' error bodies and pages
"""
from __future__ import annotations

from fakes.woocommerce.server import Request
from fakes.woocommerce.store import DEFAULT_CONSUMER_KEY, DEFAULT_CONSUMER_SECRET, FakeWooStore
from fakes.woocommerce.wordpress import WC_NAMESPACE, php_json_encode, slugify, wpautop

__all__ = ["DEFAULT_CONSUMER_KEY", "DEFAULT_CONSUMER_SECRET", "FakeWooStore", "Request", "WC_NAMESPACE",
           "php_json_encode", "slugify", "wpautop"]
