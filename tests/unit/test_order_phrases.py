"""Superlatives that order a listing ("the cheapest event this weekend")."""
import pytest

from kbframework.retrieval.phrases import find_order


@pytest.mark.parametrize("q, order, matched", [
    ("cheapest event this weekend?", "price_asc", "cheapest"),
    ("what is your most expensive dress?", "price_desc", "most expensive"),
    ("the least expensive tent", "price_asc", "the least expensive"),
    ("the earliest show on Friday", "start_asc", "the earliest"),
    ("your lowest-priced hoodie", "price_asc", "lowest-priced"),
])
def test_a_superlative_orders(q, order, matched):
    [f] = find_order(q)
    assert (f.field, f.value, f.matched) == ("order", order, matched)


@pytest.mark.parametrize("q", ["cheap hoodies", "what is on tonight?", "expensive taste"])
def test_no_superlative_no_order(q):
    assert find_order(q) == []
