"""A three-word question frame with its own time ("what's on tonight?") is a new question, not
a fragment of the previous one: after a dress question it must not be glued onto the dresses
(tests/test_widget_conversation.py meets it in the widget). Fragments of constraints stay
follow-ups."""
import pytest

from kbframework.retrieval.conversation import FOLLOW_UP, TOPIC_SHIFT, classify

H = [{"role": "user", "content": "I'm looking for the Crimson Evening Dress"},
     {"role": "assistant", "content": "Crimson Evening Dress: €89, in stock."}]


@pytest.mark.parametrize("q", ["what's on tonight?", "what’s on tomorrow?", "what's happening tonight?",
                               "anything on Saturday?", "what is on tonight?"])
def test_a_short_frame_with_its_own_time_is_a_topic_shift(q):
    t = classify(q, H)
    assert t.kind == TOPIC_SHIFT, (q, t)


@pytest.mark.parametrize("q", ["tonight?", "and tonight?", "on Saturday?", "in red?", "cheaper ones?", "what else?"])
def test_fragments_stay_follow_ups(q):
    t = classify(q, H)
    assert t.kind == FOLLOW_UP, (q, t)


VOCAB = {"venues": ["Barutana", "Warehouse"], "cities": ["Belgrade"]}


@pytest.mark.parametrize("q", ["where is Barutana?", "where's Barutana?", "Where is the Warehouse?"])
def test_where_is_a_named_place_is_a_new_question(q):
    # a complete question about a place of the organization's own, not a fragment of the dresses
    t = classify(q, H, VOCAB)
    assert t.kind == TOPIC_SHIFT, (q, t)


@pytest.mark.parametrize("q", ["where is it?", "where are they?", "and where is Barutana?", "Barutana?"])
def test_where_pointing_back_stays_a_follow_up(q):
    t = classify(q, H, VOCAB)
    assert t.kind == FOLLOW_UP, (q, t)
