"""The chunker's token counts: cached word pieces give exactly the tokenizer's counts, and
counting a whole batch together gives exactly the chunks one document at a time gives."""
import random

from kbframework.ingest.chunker import ChunkSettings, TokenCounts, chunk_text, prime_documents
from kbframework.ingest.tokens import _piece_counter, count_tokens_batch, count_tokens_many
from kbframework.types import Segment

ODD = ["", " ", "  ", "a  b", " leading", "trailing ", "tab\there", "no\u00a0break space", "new\nline\n\nx",
       "emoji 😀🎉 ok", "中文字符测试", "Ünïcödé façade — “quotes” …", "<s> special </s> <unk>", "x<s>y", "</s>",
       "\u2581already\u2581", "a\u2581 b", "x \u2581\u2581y", "em\u2003space", "\r\n", "12345 6789.01",
       "e-mail: a@b.c", "ﬁ ligature", "ſ long s", "İstanbul ıi", "\x00nul", "   many    spaces   ",
       "\u200bzero width", "SKU X200-B, 3×4 m², €19.95"]
WORDS = ("return policy shipping refund order techno event ticket venue dress jacket price stock "
         "Belgrade Ljubljana naïve café déjà-vu").split()


def texts(n=600, seed=3):
    rng = random.Random(seed)
    out = list(ODD)
    for _ in range(n):
        parts = [rng.choice(ODD + WORDS) for _ in range(rng.randint(1, 40))]
        out.append(rng.choice([" ", "  ", "\n", "", "\t"]).join(parts))
    return out


def test_the_shipped_tokenizer_is_counted_by_pieces():
    assert _piece_counter() is not None


def test_piece_counts_equal_the_tokenizer_counts():
    sample = texts()
    assert count_tokens_many(sample) == count_tokens_batch(sample)
    assert count_tokens_many(sample) == count_tokens_batch(sample)  # again, from the cache


def test_a_batch_counted_together_chunks_exactly_as_one_by_one():
    rng = random.Random(5)
    docs = []
    for k in range(30):
        paras = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 60))) + "."
                 for _ in range(rng.randint(1, 40))]
        if k % 4 == 0:
            paras.insert(1, "## Section " + str(k))
        if k % 5 == 0:
            paras.append(" ".join(["word"] * 1200))  # a sentence longer than a chunk
        text = "\n\n".join(paras)
        docs.append([Segment(p, page=i + 1) for i, p in enumerate(text.split("\n\n## "))] if k % 3 == 0
                    else [Segment(text)])
    for settings in (ChunkSettings(), ChunkSettings(200, 300, 20, 40)):
        counts = TokenCounts()
        prime_documents(counts, [(d, settings) for d in docs])
        for d in docs:
            assert chunk_text(d, "Title", settings, counts) == chunk_text(d, "Title", settings)
