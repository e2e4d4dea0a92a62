"""The organization's labels found in a question: a label written as one word matches the
question's hyphenated or spaced form and the other way round ("t-shirts" for WooCommerce's
sample category "Tshirts"), and nothing else is glued together."""
import pytest

from kbframework.retrieval.phrases import VocabularyIndex, stem

V = VocabularyIndex({"tags": ["T-Shirt", "red"], "categories": ["Clothing > Tshirts", "Hoodies", "E-Books"],
                     "venues": ["Barutana"]})


def found(q: str) -> set[tuple[str, str]]:
    return {(f.field, v) for f in V.find(q) for v in (f.value if isinstance(f.value, list) else [f.value])}


@pytest.mark.parametrize("q", ["do you have t-shirts?", "any t shirts?", "tshirts please", "a red T-Shirt"])
def test_a_word_written_apart_or_together_finds_both_labels(q):
    assert {("tag", "T-Shirt"), ("category", "Clothing > Tshirts")} <= found(q), q


@pytest.mark.parametrize("q, label", [("ebooks?", "E-Books"), ("e-books", "E-Books"), ("e books", "E-Books")])
def test_a_hyphenated_label_is_found_written_together(q, label):
    assert ("category", label) in found(q)


@pytest.mark.parametrize("q", ["at shirts", "a pen nant", "what shirts", "hood ies"])
def test_words_are_not_glued_without_a_hyphen_or_a_one_letter_part(q):
    assert not {f for f in found(q) if f[1] in ("T-Shirt", "Clothing > Tshirts", "Hoodies")}, q


def test_a_singular_ending_in_ie_finds_its_plural_label_and_back():
    idx = VocabularyIndex({"categories": ["Clothing > Hoodies", "Beanie"], "version": "ie"})
    assert [f.value for f in idx.find("a red hoodie")] == [["Clothing > Hoodies"]]
    assert [f.value for f in idx.find("any beanies?")] == [["Beanie"]]
    assert stem("parties") == stem("party") and stem("tie") == "tie"
