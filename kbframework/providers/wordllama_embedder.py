"""WordLlama: 256-d static embeddings, weights inside the wheel, thousands of texts a second.

``WordLlama.load()`` tries to download its tokenizer file although the wheel contains it,
so we load the tokenizer and the safetensors weights from the package folder directly.
"""
from __future__ import annotations

import threading
from pathlib import Path

from kbframework.ingest.tokens import count_tokens
from kbframework.types import EmbeddingProvider


class WordLlamaEmbedder(EmbeddingProvider):
    name = "wordllama"
    model = "wordllama-l2_supercat-256"
    dim = 256
    batch_size = 256
    is_offline = True
    cost_per_1k_tokens = 0.0

    def __init__(self):
        self._model = None
        self._lock = threading.Lock()

    def _load(self):
        with self._lock:
            if self._model is None:
                import wordllama
                from safetensors import safe_open
                from tokenizers import Tokenizer
                from wordllama.inference import WordLlamaInference

                root = Path(wordllama.__file__).parent
                tok = Tokenizer.from_file(str(root / "tokenizers" / "l2_supercat_tokenizer_config.json"))
                with safe_open(str(root / "weights" / "l2_supercat_256.safetensors"), framework="np") as f:
                    emb = f.get_tensor("embedding.weight")
                self._model = WordLlamaInference(emb, tok)
        return self._model

    def available(self) -> bool:
        try:
            import wordllama  # noqa: F401

            return True
        except ImportError:
            return False

    def embed_batch(self, texts: list[str]) -> list:
        model = self._load()
        vecs = model.embed(list(texts), norm=True, batch_size=64)
        return [v for v in vecs]

    def count_tokens(self, text: str) -> int:
        return count_tokens(text)
