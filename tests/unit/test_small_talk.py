"""Small talk is recognised by the whole message; a greeting before a question is a question."""
import pytest

from kbframework.retrieval.small_talk import ABOUT, FAREWELL, GREETING, THANKS, kind_of, reply, without_small_talk


@pytest.mark.parametrize("message, kind", [
    ("hi", GREETING), ("Hello!", GREETING), ("hey there 👋", GREETING), ("Good evening!", GREETING),
    ("thanks!", THANKS), ("Thank you so much", THANKS), ("ok, thanks", THANKS), ("cheers", THANKS),
    ("bye", FAREWELL), ("see you later!", FAREWELL),
    ("who are you?", ABOUT), ("are you a bot?", ABOUT), ("what can you do?", ABOUT), ("help", ABOUT),
])
def test_small_talk(message, kind):
    assert kind_of(message) == kind


@pytest.mark.parametrize("message", [
    "hi, do you have red dresses?", "thanks, and what is on tomorrow?", "help me find a tent",
    "what can you do about a late delivery?", "Hello Kitty backpack", "goodbye party on Friday?", "",
])
def test_a_message_with_a_question_in_it_is_no_small_talk(message):
    assert kind_of(message) is None


def test_the_reply_uses_the_welcome_and_says_what_it_knows():
    assert reply(GREETING, "Nights", "Welcome to Nights! Ask me what's on.", []) == "Welcome to Nights! Ask me what's on."
    text = reply(ABOUT, "Nights", None, ["our events (what's on, where, tickets)", "our articles and guides"])
    assert "Nights's own knowledge: our events (what's on, where, tickets) and our articles and guides" in text


def test_small_talk_turns_leave_the_history():
    hist = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": "what is on tomorrow?"}, {"role": "assistant", "content": "Jazz."},
            {"role": "user", "content": "thanks!"}, {"role": "assistant", "content": "You're welcome!"}]
    assert [m["content"] for m in without_small_talk(hist)] == ["what is on tomorrow?", "Jazz."]


def test_yes_to_the_fallbacks_offer_names_the_question_to_search_again():
    from kbframework.retrieval.small_talk import YES, broaden_what

    offer = "I couldn't find anything about that. Want me to search more broadly?"
    hist = [{"role": "user", "content": "dresses under 10"}, {"role": "assistant", "content": offer}]
    assert kind_of("yes please") == YES and kind_of("sure, go ahead") == YES
    assert broaden_what(hist, offer) == "dresses under 10"
    assert broaden_what(hist[:1] + [{"role": "assistant", "content": "Here are two dresses."}], offer) is None
    # a "yes" turn stays in the history: it was searched
    assert len(without_small_talk(hist + [{"role": "user", "content": "yes"},
                                          {"role": "assistant", "content": "Three dresses."}])) == 4


def test_an_acknowledged_ok_leaves_the_history():
    from kbframework.retrieval.small_talk import OK_TEXT

    hist = [{"role": "user", "content": "red dresses"}, {"role": "assistant", "content": "Three.", "document_ids": ["a"]},
            {"role": "user", "content": "ok"}, {"role": "assistant", "content": OK_TEXT}]
    assert without_small_talk(hist) == hist[:2]  # "the cheapest one?" still points at the dresses
