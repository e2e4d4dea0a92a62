"""The WordLlama embedder pools the wheel's weights itself (to skip the package's heavy
``__init__``); its vectors must be exactly those of WordLlama's own inference, except
where that inference divides by zero: a text without tokens is the zero vector, not NaN.
No vector cosine similarity cannot use (NaN, infinite, all zeros) reaches PostgreSQL: the
ingestion refuses it, and the query's vector leg steps aside for it."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from sqlalchemy import select

from kbframework.errors import EmbeddingError
from kbframework.ingest.embedding import embed_texts, usable_vector
from kbframework.providers.wordllama_embedder import WordLlamaEmbedder

TEXTS = ["What is the return policy?", "", "a", "Räder für Kinder — 20 % Rabatt bis Sonntag",
         " ".join(["long text with many words"] * 200)] + [f"note {i}" for i in range(70)]

#: text a reader sees no words in; WordLlama's byte fallback still gives each of them tokens
NO_WORDS = ["!!!", "…", "🙂🎉", "— — —", "\u200b", "#"]


def _ours(texts):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a NaN from 0/0 is a RuntimeWarning: fail on it
        return np.array(WordLlamaEmbedder().embed_batch(texts))


def test_vectors_equal_wordllama_inference():
    from safetensors import safe_open
    from tokenizers import Tokenizer
    from wordllama.inference import WordLlamaInference

    from kbframework.ingest.tokens import wordllama_dir

    root = wordllama_dir()
    tok = Tokenizer.from_file(str(root / "tokenizers" / "l2_supercat_tokenizer_config.json"))
    with safe_open(str(root / "weights" / "l2_supercat_256.safetensors"), framework="np") as f:
        reference = WordLlamaInference(f.get_tensor("embedding.weight"), tok)
    with np.errstate(invalid="ignore"):  # the reference divides the empty text's zeros by zero
        expected = reference.embed(TEXTS, norm=True, batch_size=64)
    assert np.isnan(expected[1]).all()  # ... and gets NaN, where ours gives zeros
    got = _ours(TEXTS)
    assert got.shape == (len(TEXTS), 256)
    assert np.array_equal(got, np.nan_to_num(expected))


def test_a_text_without_tokens_is_the_zero_vector():
    got = _ours(["", *NO_WORDS, ""])
    assert np.isfinite(got).all()
    assert not got[0].any() and not got[-1].any()
    norms = np.linalg.norm(got[1:-1], axis=1)
    assert np.allclose(norms, 1.0, atol=1e-5), norms


class _Fixed:
    """An embedding provider that answers ``bad`` with ``vec``, any other text with a unit vector."""

    name, model, dim, batch_size = "fixed", "fixed-3", 3, 64

    def __init__(self, vec, bad: str = ""):
        self.vec, self.bad, self.calls = vec, bad, 0

    def embed_batch(self, texts):
        self.calls += 1
        return [np.array(self.vec if t == self.bad else [0.6, 0.8, 0.0], dtype=np.float32) for t in texts]

    def count_tokens(self, text):
        return 1


@pytest.mark.parametrize("vec", [[math.nan, 0.0, 0.0], [math.inf, 1.0, 0.0], [0.0, 0.0, 0.0]])
def test_ingestion_refuses_a_vector_without_direction(vec):
    provider = _Fixed(vec)
    with pytest.raises(EmbeddingError, match=r"1 vector\(s\) without a direction.*text 2 of 3"):
        embed_texts(provider, ["fine", "", "fine"])
    assert provider.calls == 1  # refused at once: asking again gives the same vector
    assert not usable_vector(vec) and usable_vector([0.6, 0.8, 0.0])
    assert embed_texts(provider, ["fine", "also fine"]).shape == (2, 3)


def test_text_without_words_is_indexed_and_asked_about_without_nan(kb_admin):
    from kbframework.db import session_scope
    from kbframework.models import Chunk

    body = "  ".join(NO_WORDS)
    r = kb_admin.post("/api/admin/v1/documents/manual?wait=1", json={"title": "🙂", "body": body})
    assert r.status_code == 201, r.get_data(as_text=True)
    doc = r.get_json()
    assert doc["status"] == "active" and doc["chunk_count"] >= 1
    with session_scope() as s:
        vecs = s.scalars(select(Chunk.embedding).where(Chunk.document_id == doc["id"])).all()
    assert vecs and all(usable_vector(v) for v in vecs)
    for question in ("🙂🎉", "!!!"):
        r = kb_admin.post("/api/admin/v1/chat", json={"question": question})
        assert r.status_code == 200, r.get_data(as_text=True)
        raw = r.get_data(as_text=True)
        assert "NaN" not in raw and "Infinity" not in raw
        assert r.get_json()["debug"]["vector"]["hits"], "the vector leg ran on the question"


def test_a_query_vector_without_direction_leaves_the_search_to_keywords(monkeypatch):
    from kbframework.retrieval import steps

    provider = _Fixed([math.nan, 0.0, 0.0], bad="?")
    monkeypatch.setattr(steps, "org_models", lambda s, org_id: {provider.model: 1})
    monkeypatch.setattr(steps.registry, "embedder_for_model", lambda model: provider)
    monkeypatch.setattr(steps, "_ledger", lambda *a, **kw: None)
    vecs, dbg = steps.embed_query(None, "org", "?")
    assert vecs == {} and dbg["degraded"]
    assert "no usable vector" in dbg["models"][provider.model] and "keyword leg" in dbg["note"]


def test_a_query_reads_the_mapped_float16_rows_and_bulk_work_the_converted_table(tmp_path):
    """A small call converts only its tokens' rows; once the process has embedded more than one
    pooling batch, in one call or in many small ones (a worker's parts), the table is converted
    once. Both give the same vectors; a malformed weights file is a clear error."""
    import json
    import struct

    from kbframework.providers.wordllama_embedder import POOL_BATCH, map_tensor

    emb = WordLlamaEmbedder()
    small = np.array(emb.embed_batch(TEXTS[:POOL_BATCH]))
    weights = emb._load()[0]
    assert weights.dtype == np.float16 and weights.shape == (32000, 256) and not weights.flags.owndata
    assert emb._table is None
    big = np.array(emb.embed_batch(TEXTS))
    assert len(TEXTS) > POOL_BATCH and emb._table.dtype == np.float32 and emb._load()[0] is emb._table
    assert np.array_equal(small, big[:POOL_BATCH])

    parts = WordLlamaEmbedder()  # a worker's load: many calls of a few texts each
    for k in range(0, POOL_BATCH, 8):
        parts.embed_batch(TEXTS[k:k + 8])
    assert parts._table is None, "a query-sized process keeps reading the mapped rows"
    assert np.allclose(np.array(parts.embed_batch(TEXTS[:8])), small[:8], atol=1e-6)
    assert parts._table is not None and parts._table.dtype == np.float32

    data = np.arange(6, dtype="<f2")
    for header, message in (({"w": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 12]}}, "dtype"),
                            ({"w": {"dtype": "F16", "shape": [2, 4], "data_offsets": [0, 12]}}, "size"),
                            ({"other": {"dtype": "F16", "shape": [2, 3], "data_offsets": [0, 12]}}, "no w")):
        raw = json.dumps(header).encode()
        path = tmp_path / "t.safetensors"
        path.write_bytes(struct.pack("<Q", len(raw)) + raw + data.tobytes())
        with pytest.raises(EmbeddingError, match=message):
            map_tensor(path, "w")
    raw = json.dumps({"w": {"dtype": "F16", "shape": [2, 3], "data_offsets": [0, 12]}}).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data.tobytes())
    assert map_tensor(path, "w").tolist() == [[0, 1, 2], [3, 4, 5]]
