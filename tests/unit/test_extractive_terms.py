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


def test_a_products_field_lines_are_not_quoted_as_sentences():
    passages = [{"n": 1, "title": "Hoodie", "role": "product", "price": "€45", "stock": "in stock",
                 "content": "# Hoodie\n\nCategories: Clothing > Hoodies\nColor: Blue, Green, Red\n"
                            "A warm blue hoodie with a kangaroo pocket and a soft lining."}]
    text = ExtractiveAnswerer().answer("any blue hoodies?", passages)
    assert "Hoodie: €45, in stock." in text and "kangaroo pocket" in text
    assert "Categories:" not in text and "Color:" not in text, text
    # a support page's own "Label: text" lines are its content, and stay quotable
    support = [{"n": 1, "title": "Returns", "role": "support",
                "content": "Returns: within 30 days of delivery, for a full refund of the price."}]
    assert "within 30 days" in ExtractiveAnswerer().answer("can I return it within 30 days?", support)


def test_a_field_the_question_asks_for_is_quoted_from_a_line_of_fields():
    passages = [{"n": 1, "title": "Awesome V-Neck T-Shirt", "role": "product", "price": "€15–€20",
                 "content": "# Awesome V-Neck T-Shirt\n\nThis is a variable product.\n\n"
                            "Categories: Tshirts Color: Blue, Green, Red Size: Large, Medium, Small"}]
    text = ExtractiveAnswerer().answer("what sizes does the v-neck come in?", passages)
    assert "- Size: Large, Medium, Small [1]" in text and "Categories" not in text, text
    text = ExtractiveAnswerer().answer("which colours?", passages)
    assert "- Color: Blue, Green, Red [1]" in text and "Size:" not in text, text


def test_an_age_with_a_plus_is_a_word_and_a_policy():
    from kbframework.retrieval.policy import is_policy_question

    assert "18+" in _terms("is it 18+?") and is_policy_question("is it 18+?")
    assert is_policy_question("what should I wear?") and not is_policy_question("a jacket to wear in the rain")
