"""The offline answerer's word matching: short names in capitals ("EU", "UK") count."""
from kbframework.providers.extractive import ExtractiveAnswerer, _terms


def test_short_words_in_capitals_or_with_a_digit_count_and_filler_does_not():
    assert {"eu", "deliver", "countries"} <= _terms("Do you deliver to other EU countries?")
    assert "uk" in _terms("shipping to the UK") and "4k" in _terms("a 4K camera")
    assert not {"do", "to", "of", "is", "it"} & _terms("do to of is it")


def test_the_sentence_naming_the_eu_is_chosen():
    passages = [{"n": 1, "title": "Shipping and delivery", "role": "support", "content":
                 "Orders to Serbia arrive within two working days of dispatch. "
                 "Orders to EU countries take five to seven working days of dispatch."}]
    text = ExtractiveAnswerer().answer("how long to EU countries?", passages, max_sentences=1)
    assert "Orders to EU countries take five to seven working days" in text and "Serbia" not in text, text
