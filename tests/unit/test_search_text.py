"""The text the two legs search with: the applied constraint phrases removed, also when a
follow-up's rewrite has split the phrase apart."""
from kbframework.retrieval.filters import search_text
from kbframework.types import FilterPart


def part(field, matched, value=None):
    return FilterPart(field=field, value=value, extractor="rules", matched=matched)


def test_a_phrase_in_one_piece_is_removed():
    assert search_text("techno under €30 tonight", [part("price_max", "under €30", 30)]) == "techno tonight"


def test_a_phrase_the_rewrite_split_is_removed_word_by_word():
    parts = [part("date_range", "on Monday"), part("price_max", "anything free", 0)]
    # "anything ... free" around the inherited "on Monday": no word with content is left, so the
    # question is all constraints (returned whole, for the listing)
    assert search_text("jazz anything on Monday free", parts) == "jazz"


def test_a_split_phrase_is_kept_when_one_of_its_words_is_missing():
    assert search_text("what is cheap and fun", [part("price_max", "anything free", 0)]) == "what is cheap and fun"


def test_words_inside_other_words_are_not_removed():
    assert search_text("freestyle anything", [part("price_max", "anything free", 0)]) == "freestyle anything"
