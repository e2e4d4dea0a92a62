"""Superlatives that order a listing ("the cheapest event this weekend"), and the stock filter."""
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


@pytest.mark.parametrize("q, found", [
    ("back to the dresses: which are in stock?", True),  # "back" here is no restock question
    ("which dresses are in stock?", True),
    ("is it back in stock?", False), ("when will it be in stock?", False), ("in stock again?", False),
])
def test_a_stock_filter_or_a_question_about_one_items_stock(q, found):
    from kbframework.retrieval.phrases import find_stock

    assert bool(find_stock(q)) is found


def test_a_bare_lower_bound_is_a_price_once_the_question_names_the_shops_category():
    from kbframework.retrieval.phrases import find_prices

    assert find_prices("hoodies over 100") == []  # alone: could be anything over 100
    [f] = find_prices("hoodies over 100", priced=True)
    assert (f.field, f.value) == ("price_min", 100.0)
    assert find_prices("tents for kids over 5", priced=True) == []  # still an age
    assert find_prices("tents over 4 people", priced=True) == []  # still a quantity
