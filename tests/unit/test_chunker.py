"""The chunker: sizes, overlap, structure-aware splits, page ranges."""
import random

from kbframework.ingest.chunker import ChunkSettings, chunk_text, page_label
from kbframework.ingest.tokens import count_tokens
from kbframework.types import Segment

WORDS = "alpha beta gamma delta return policy shipping refund customer order days within".split()


def para(rng, sentences):
    return " ".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 18))).capitalize() + "."
                    for _ in range(sentences))


def long_text(seed=1):
    rng = random.Random(seed)
    return ("# Returns\n\n" + "\n\n".join(para(rng, 5) for _ in range(14))
            + "\n\n## Shipping\n\n- first item\n- second item\n\n" + "\n\n".join(para(rng, 6) for _ in range(12)))


def test_chunk_sizes_within_bounds():
    chunks = chunk_text(long_text(), title="Policy")
    assert len(chunks) >= 3
    for c in chunks[:-1]:
        assert 500 <= c.token_count <= 800, c.token_count
    assert chunks[-1].token_count <= 800
    assert [c.index for c in chunks] == list(range(len(chunks)))


def test_overlap_between_consecutive_chunks():
    chunks = chunk_text(long_text(2), title="Policy")
    for a, b in zip(chunks, chunks[1:]):
        if b.content.startswith("#"):
            continue  # a new section starts clean
        # the start of b repeats the tail of a: 50–100 tokens
        common = max((n for n in range(20, min(len(a.content), len(b.content)))
                      if a.content.endswith(b.content[:n])), default=0)
        overlap_tokens = count_tokens(b.content[:common]) if common else 0
        assert 30 <= overlap_tokens <= 110, (overlap_tokens, head[:120])


def test_never_splits_inside_a_sentence_when_avoidable():
    chunks = chunk_text(long_text(3), title="Policy")
    for c in chunks:
        assert c.content.rstrip().endswith((".", "item")), c.content[-40:]


def test_short_document_is_one_chunk_with_heading():
    chunks = chunk_text("# FAQ\n\nWe open at nine. We close at five.", title="Opening hours")
    assert len(chunks) == 1
    assert chunks[0].heading == "Opening hours › FAQ"
    assert "We close at five." in chunks[0].content


def test_page_ranges_recorded():
    rng = random.Random(4)
    segs = [Segment(para(rng, 25), page=p) for p in range(1, 6)]
    chunks = chunk_text(segs, title="Manual", settings=ChunkSettings())
    assert chunks[0].metadata["page_start"] == 1
    assert chunks[-1].metadata["page_end"] == 5
    assert all(c.metadata["page_start"] <= c.metadata["page_end"] for c in chunks)
    assert page_label({"page_start": 4, "page_end": 5}) == "page 4–5"
    assert page_label({"page_start": 12, "page_end": 12}) == "page 12"


def test_oversized_sentence_is_split_by_words():
    text = " ".join(["word"] * 3000)
    chunks = chunk_text(text, title="Long")
    assert len(chunks) >= 3
    assert all(c.token_count <= 800 for c in chunks)
