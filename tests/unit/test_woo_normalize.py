"""WooCommerce product → DocumentDraft mapper, on the docs' examples and the demo CSV."""
from __future__ import annotations

import copy
import json
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
for extra in (ROOT, ROOT / "plugins" / "woocommerce"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from kbframework.types import DocumentDraft  # noqa: E402
from kbframework_woocommerce.normalize import (  # noqa: E402
    cheap_fields, mapping_fingerprint, normalize_mapping, product_to_draft, validate_mapping,
    _html_text, _price_html_amounts,
)
from fakes.woocommerce_server import FakeWooStore  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "woocommerce"
EXAMPLES = DATA / "rest_api_v3" / "examples"
CSV = DATA / "sample_data" / "sample_products.csv"

pytestmark = pytest.mark.skipif(not EXAMPLES.exists(), reason="shared WooCommerce fixtures missing")


def example(name: str):
    return json.loads((EXAMPLES / name).read_text())["response"]


@pytest.fixture(scope="module")
def simple_product():
    return example("products__retrieve-a-product__03.json")


@pytest.fixture(scope="module")
def variable_product():
    return example("products__create-a-product__02.json")


@pytest.fixture(scope="module")
def docs_variations():
    return example("product-variations__list-all-product-variations__03.json")


@pytest.fixture()
def store():
    s = FakeWooStore.from_sample_csv(str(CSV))
    yield s
    s.stop()


def draft_for(store: FakeWooStore, pid: int, mapping=None) -> DocumentDraft:
    p = store.get(pid)
    variations = store.variations_of(pid) if p["type"] == "variable" else None
    return product_to_draft(p, variations, mapping or {})


# ----------------------------------------------------------------------------- docs examples

def test_simple_docs_product_maps_every_column(simple_product):
    d = product_to_draft(simple_product, None, {})
    assert isinstance(d, DocumentDraft)
    assert d.type == "woo_product" and d.document_role == "product"
    assert d.external_id == "794"
    assert d.title == "Premium Quality"
    assert d.source_url == "https://example.com/product/premium-quality-19/"
    assert d.primary_image_url == "https://example.com/wp-content/uploads/2017/03/T_2_front-4.jpg"
    assert d.source_modified_at == datetime(2017, 3, 23, 20, 1, 14, tzinfo=timezone.utc)
    assert d.source_modified_at.tzinfo is not None
    assert d.published is True
    assert d.normalized_content.startswith("# Premium Quality\n")
    assert "Categories: Clothing, T-shirts" in d.normalized_content
    m = d.metadata
    assert m["price"] == 21.99 and m["regular_price"] == 21.99 and m["sale_price"] is None
    assert m["price_min"] == m["price_max"] == 21.99
    assert m["on_sale"] is False and m["in_stock"] is True and m["stock_status"] == "instock"
    assert m["currency"] == "EUR"
    assert m["categories"] == ["Clothing", "T-shirts"]
    assert m["category_slugs"] == ["clothing", "t-shirts"]
    assert m["product_type"] == "simple" and m["sku"] == ""


def test_html_stripped_and_price_not_in_text(simple_product):
    d = product_to_draft(simple_product, None, {})
    text = d.normalized_content
    for needle in ("<p>", "</p>", "<span", "&#36;", "21.99", "instock"):
        assert needle not in text
    # the short description is the long one's first sentence: said once
    assert text.count("Pellentesque habitant morbi") == 1


def test_variable_docs_product_with_variations(variable_product, docs_variations):
    d = product_to_draft(variable_product, docs_variations, {})
    m = d.metadata
    assert m["product_type"] == "variable"
    assert m["price"] == 9.0 and m["price_min"] == 9.0 and m["price_max"] == 9.0
    assert m["in_stock"] is True
    assert [v["id"] for v in m["variations"]] == [733, 732]
    assert m["variations"][0]["attributes"] == {"Color": "Green"}
    # Color has visible:false but variation:true — the shopper picks it, so it is text
    assert "Color: Black, Green" in d.normalized_content
    assert "Size: S, M" in d.normalized_content
    assert m["attributes"] == {"Color": ["Black", "Green"], "Size": ["S", "M"]}
    # the newest variation date wins
    assert d.source_modified_at == datetime(2017, 3, 23, 20, 3, 12, tzinfo=timezone.utc)


def test_attribute_mapping_to_tags_and_ignore(variable_product, docs_variations):
    mapping = {"attributes": {"color": "text+tags", "Size": "ignore"}}
    d = product_to_draft(variable_product, docs_variations, mapping)
    assert d.tags == ["Black", "Green"]
    assert "Color: Black, Green" in d.normalized_content
    assert "Size:" not in d.normalized_content
    assert d.metadata["attributes"] == {}


def test_variable_without_variations_uses_parent_and_price_html(variable_product):
    p = copy.deepcopy(variable_product)
    p["price"] = "9.00"
    p["price_html"] = ('<span class="woocommerce-Price-amount amount"><bdi><span class="woocommerce-'
                       'Price-currencySymbol">&euro;</span>9.00</bdi></span> &ndash; <span class="'
                       'woocommerce-Price-amount amount"><bdi><span class="woocommerce-Price-currency'
                       'Symbol">&euro;</span>1.234,50</bdi></span>')
    d = product_to_draft(p, None, {})
    assert d.metadata["price_min"] == 9.0 and d.metadata["price_max"] == 1234.5
    assert "variations" not in d.metadata


def test_price_html_parsing_ignores_struck_and_screen_reader_copies():
    html = ('<del aria-hidden="true"><span class="woocommerce-Price-amount amount"><bdi>'
            '<span class="woocommerce-Price-currencySymbol">&#36;</span>20.00</bdi></span></del> '
            '<span class="screen-reader-text">Original price was: &#36;20.00.</span><ins aria-hidden="true">'
            '<span class="woocommerce-Price-amount amount"><bdi><span class="woocommerce-Price-'
            'currencySymbol">&#36;</span>18.00</bdi></span></ins><span class="screen-reader-text">'
            'Current price is: &#36;18.00.</span>')
    assert _price_html_amounts(html) == [18.0]
    assert _price_html_amounts("<span>1,299.99</span>") == [1299.99]
    assert _price_html_amounts("<span>1.299</span>") == [1299.0]


def test_variation_payload_is_never_a_document(store):
    status_body = store.webhook_body("product.updated", 79)
    payload = json.loads(status_body)
    assert payload["type"] == "variation" and payload["parent_id"] == 45
    d = product_to_draft(payload, None, {})
    assert d.published is False
    assert d.metadata["parent_id"] == 45


# ----------------------------------------------------------------------------- the demo CSV

def test_csv_catalogue_maps_without_errors(store):
    drafts = [draft_for(store, pid) for pid in store.product_ids()]
    assert len(drafts) == 18  # 25 rows minus 7 variations
    for d in drafts:
        assert d.normalized_content.startswith(f"# {d.title}")
        assert "<" not in d.normalized_content
        assert d.source_modified_at is not None and d.source_modified_at.tzinfo is not None
        assert d.metadata["price"] is None or isinstance(d.metadata["price"], float)
    by_id = {d.external_id: d for d in drafts}
    assert by_id["89"].metadata["external_url"] == "https://mercantile.wordpress.org/product/wordpress-pennant/"
    assert by_id["87"].metadata["grouped_products"] == [46, 47, 48]


def test_csv_variable_price_range_from_variations(store):
    tee = draft_for(store, 44)
    assert tee.metadata["price_min"] == 15.0 and tee.metadata["price_max"] == 20.0
    assert tee.metadata["price"] == 15.0
    assert tee.metadata["attributes"]["Size"] == ["Large", "Medium", "Small"]
    hoodie = draft_for(store, 45)
    assert hoodie.metadata["on_sale"] is True
    assert hoodie.metadata["price_min"] == 42.0 and hoodie.metadata["price_max"] == 45.0
    assert hoodie.metadata["sale_price"] == 42.0 and hoodie.metadata["regular_price"] == 45.0
    red = next(v for v in hoodie.metadata["variations"] if v["attributes"]["Color"] == "Red")
    assert red["on_sale"] is True and red["price"] == 42.0


def test_variable_in_stock_when_any_variation_is(store):
    vids = [v["id"] for v in store.variations_of(44)]
    for vid in vids[1:]:
        store.update_variation(44, vid, stock_status="outofstock")
    assert draft_for(store, 44).metadata["in_stock"] is True
    store.update_variation(44, vids[0], stock_status="onbackorder")
    d = draft_for(store, 44)
    assert d.metadata["in_stock"] is True and d.metadata["stock_status"] == "onbackorder"
    store.update_variation(44, vids[0], stock_status="outofstock")
    d = draft_for(store, 44)
    assert d.metadata["in_stock"] is False and d.metadata["stock_status"] == "outofstock"
    # a disabled variation does not count
    store.update_variation(44, vids[0], stock_status="instock", status="private")
    assert draft_for(store, 44).metadata["in_stock"] is False


def test_hidden_draft_private_trash_are_unpublished(store):
    assert draft_for(store, 64).published is False  # "Hoodie with Pocket": catalog visibility hidden
    assert draft_for(store, 46).published is True
    store.unpublish(46)
    assert draft_for(store, 46).published is False
    store.update(47, status="private")
    assert draft_for(store, 47).published is False
    store.delete(48)
    assert draft_for(store, 48).published is False


def test_price_change_does_not_touch_the_text(store):
    before = draft_for(store, 47)
    store.update(47, regular_price="21", sale_price="19")
    after = draft_for(store, 47)
    assert before.normalized_content == after.normalized_content
    assert after.metadata["price"] == 19.0 and after.metadata["on_sale"] is True
    changed = {k for k in set(before.metadata) | set(after.metadata)
               if before.metadata.get(k) != after.metadata.get(k)}
    assert changed and changed <= set(cheap_fields())
    assert after.source_modified_at > before.source_modified_at


def test_variation_price_change_is_cheap(store):
    before = draft_for(store, 45)
    vid = store.variations_of(45)[1]["id"]
    store.update_variation(45, vid, regular_price="99")
    after = draft_for(store, 45)
    assert before.normalized_content == after.normalized_content
    assert after.metadata["price_max"] == 99.0
    changed = {k for k in set(before.metadata) | set(after.metadata)
               if before.metadata.get(k) != after.metadata.get(k)}
    assert changed <= set(cheap_fields())


def test_cheap_fields_list():
    assert {"price", "regular_price", "sale_price", "on_sale", "price_min", "price_max",
            "in_stock", "stock_status", "stock_quantity"} <= set(cheap_fields())
    assert "categories" not in cheap_fields()


# ----------------------------------------------------------------------------- mapping

def rich_product(simple_product) -> dict:
    p = copy.deepcopy(simple_product)
    p["name"] = "Black &amp; White Tee"
    p["description"] = ('<h2>Details</h2><p>Soft&nbsp;cotton &amp; <strong>organic</strong> dye.</p>'
                        '<script>alert(1)</script><style>p{}</style>[vc_row][vc_column]'
                        '<ul><li>Machine wash</li><li>Made in Portugal</li></ul>[/vc_column][/vc_row]')
    p["tags"] = [{"id": 1, "name": "Summer", "slug": "summer"}, {"id": 2, "name": "summer", "slug": "s2"}]
    p["attributes"] = [
        {"id": 1, "name": "Color", "position": 0, "visible": True, "variation": False, "options": ["Black", "White"]},
        {"id": 2, "name": "Material", "position": 1, "visible": True, "variation": False, "options": ["Cotton"]},
        {"id": 0, "name": "Supplier code", "position": 2, "visible": False, "variation": False, "options": ["X-99"]},
        {"id": 0, "name": "Logo", "position": 3, "visible": True, "variation": False, "options": ["Yes"]},
    ]
    p["meta_data"] = [
        {"id": 1, "key": "_warranty", "value": "2 years"},
        {"id": 2, "key": "return_policy_snippet", "value": "<p>30 days, free returns.</p>"},
        {"id": 3, "key": "gtin", "value": "4006381333931"},
        {"id": 4, "key": "_edit_lock", "value": "1700000000:1"},
        {"id": 5, "key": "venue", "value": "Main Hall"},
        {"id": 6, "key": "price", "value": "collides"},
        {"id": 7, "key": "material", "value": "from meta"},
    ]
    p["acf"] = {"material": "Organic cotton", "event_date": "20240615", "city": "Lyon"}
    return p


MAPPING = {
    "attributes": {"Color": "text+tags", "Material": "metadata", "Logo": "ignore"},
    "meta": {"_warranty": "text", "return_policy_snippet": "text", "gtin": "metadata", "price": "metadata"},
    "acf": {"material": "text", "event_date": "column:event_start", "city": "column:city+tags"},
    "columns": {"meta.venue": "venue"},
}


def test_mapping_targets(simple_product):
    d = product_to_draft(rich_product(simple_product), None, MAPPING, currency="USD")
    text = d.normalized_content
    assert d.title == "Black & White Tee"
    assert text.startswith("# Black & White Tee\n")
    assert "Color: Black, White" in text
    assert "Material: Cotton" not in text and d.metadata["attributes"] == {"Material": ["Cotton"]}
    assert "Supplier code" not in text and "Logo" not in text
    assert "Warranty: 2 years" in text
    assert "Return policy snippet: 30 days, free returns." in text
    assert "Material: Organic cotton" in text  # ACF wins over the same-named meta key
    assert "_edit_lock" not in text and "1700000000" not in text
    assert d.metadata["gtin"] == "4006381333931"
    assert d.metadata["meta:price"] == "collides" and d.metadata["price"] == 21.99
    assert d.metadata["currency"] == "USD"
    assert d.venue == "Main Hall" and d.city == "Lyon"
    assert d.event_start == datetime(2024, 6, 15, tzinfo=timezone.utc)
    assert d.tags == ["Summer", "Black", "White", "Lyon"]
    assert "Tags: Summer, summer" in text


def test_html_to_text_cleans(simple_product):
    d = product_to_draft(rich_product(simple_product), None, {})
    text = d.normalized_content
    assert "Soft cotton & organic dye." in text
    assert "- Machine wash" in text and "- Made in Portugal" in text
    for junk in ("alert(1)", "p{}", "[vc_row]", "[/vc_column]", "&amp;", "&nbsp;", "<"):
        assert junk not in text


def test_local_html_helper():
    assert _html_text("<p>One</p>\n<p>Two &amp; three</p>") == "One\n\nTwo & three"
    assert _html_text("<ul><li>a</li><li>b</li></ul>") == "- a\n- b"
    assert _html_text("plain\ntext") == "plain\ntext"
    assert _html_text("") == ""


def test_unmapped_defaults(simple_product):
    d = product_to_draft(rich_product(simple_product), None, {})
    text = d.normalized_content
    assert "Color: Black, White" in text and "Material: Cotton" in text and "Logo: Yes" in text
    assert "Supplier code" not in text  # hidden, not a variation attribute
    assert "Warranty" not in text and "gtin" not in d.metadata  # meta: ignored unless mapped
    assert d.metadata["attributes"]["Color"] == ["Black", "White"]
    # an unmapped colour is a filter too ("any in white?"); material and logo are not
    assert d.tags == ["Summer", "Black", "White"]


def test_a_mapped_colour_attribute_keeps_its_mapping(simple_product):
    d = product_to_draft(rich_product(simple_product), None, {"attributes": {"Color": "text+metadata"}})
    assert d.tags == ["Summer"] and "Color: Black, White" in d.normalized_content
    p = rich_product(simple_product)
    p["attributes"][0].update(name="Colour", visible=False, variation=False)
    assert product_to_draft(p, None, {}).tags == ["Summer"]  # hidden from shoppers: ignored
    p["attributes"][0].update(name="Farbe", slug="pa_colour", visible=True)
    assert product_to_draft(p, None, {}).tags == ["Summer", "Black", "White"]


def test_mapping_validation_and_fingerprint():
    assert validate_mapping(MAPPING) == []
    assert validate_mapping({"attributes": {"Color": "txt"}})
    assert validate_mapping({"meta": {"x": "column:nowhere"}})
    assert validate_mapping({"colour": {}})
    assert validate_mapping({"meta": {"x": "ignore+text"}})
    with pytest.raises(ValueError):
        product_to_draft({"id": 1, "name": "x"}, None, {"attributes": {"Color": "bogus"}})
    a = {"attributes": {"Color": "tags+text", "Size": "metadata"}, "meta": {}}
    b = {"meta": {}, "attributes": {"Size": " metadata ", "Color": "text+tags"}}
    assert mapping_fingerprint(a) == mapping_fingerprint(b)
    assert mapping_fingerprint(a) != mapping_fingerprint({"attributes": {"Color": "text"}})
    assert mapping_fingerprint(None) == mapping_fingerprint({})
    assert normalize_mapping({"columns": {"meta.venue": "venue"}})["columns"] == {"meta.venue": "column:venue"}


def test_generated_catalogue_maps(store):
    g = FakeWooStore.generate(200, seed=3)
    try:
        for pid in g.product_ids():
            p = g.get(pid)
            d = product_to_draft(p, g.variations_of(pid) if p["type"] == "variable" else None, {})
            assert d.metadata["price_min"] is not None
            assert d.metadata["price_min"] <= d.metadata["price_max"]
    finally:
        g.stop()
