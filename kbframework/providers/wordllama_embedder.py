"""WordLlama: 256-d static embeddings, weights inside the wheel, thousands of texts a second.

``WordLlama.load()`` tries to download its tokenizer file although the wheel contains it,
so we load the tokenizer and the safetensors weights from the package folder directly, and
pool them here exactly as ``WordLlamaInference.embed(norm=True)`` does: importing the
package runs its ``__init__``, which pulls in pydantic and requests and costs a CLI call a
third of a second (tests/test_wordllama_embedder.py checks the vectors are identical).
"""
from __future__ import annotations

import threading

import numpy as np

from kbframework.errors import EmbeddingError
from kbframework.ingest.tokens import count_tokens, wordllama_dir, wordllama_tokenizer
from kbframework.types import EmbeddingProvider


class WordLlamaEmbedder(EmbeddingProvider):
    name = "wordllama"
    model = "wordllama-l2_supercat-256"
    dim = 256
    batch_size = 256
    is_offline = True
    cost_per_1k_tokens = 0.0

    def __init__(self):
        self._weights = None
        self._lock = threading.Lock()

    def _load(self):
        with self._lock:
            if self._weights is None:
                from safetensors import safe_open

                root, tok = wordllama_dir(), wordllama_tokenizer()
                if root is None or tok is None:
                    raise EmbeddingError("WordLlama is not installed (or its tokenizer file is missing)")
                with safe_open(str(root / "weights" / "l2_supercat_256.safetensors"), framework="np") as f:
                    emb = f.get_tensor("embedding.weight")
                tok.enable_padding()
                tok.no_truncation()
                self._weights = np.ascontiguousarray(emb.astype(np.float32))
        return self._weights, wordllama_tokenizer()

    def available(self) -> bool:
        return wordllama_dir() is not None

    def embed_batch(self, texts: list[str]) -> list:
        weights, tok = self._load()
        out = []
        for i in range(0, len(texts), 64):
            enc = tok.encode_batch(list(texts[i:i + 64]), is_pretokenized=False, add_special_tokens=False)
            ids = np.array([e.ids for e in enc], dtype=np.int32)
            mask = np.array([e.attention_mask for e in enc], dtype=np.float32)
            np.clip(ids, 0, weights.shape[0] - 1, out=ids)
            summed = np.sum(weights[ids] * mask[..., np.newaxis], axis=1, dtype=np.float32)
            pooled = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1.0).astype(np.float32)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            # a text without tokens (the empty string) pools to zeros: it stays the zero vector
            # instead of 0/0 = NaN, which pgvector refuses and which would poison every distance
            np.divide(pooled, norms, out=pooled, where=norms > 0)
            out.extend(pooled)
        return out

    def count_tokens(self, text: str) -> int:
        return count_tokens(text)
