"""The WordLlama embedder pools the wheel's weights itself (to skip the package's heavy
``__init__``); its vectors must be exactly those of WordLlama's own inference."""
from __future__ import annotations

import numpy as np

from kbframework.providers.wordllama_embedder import WordLlamaEmbedder

TEXTS = ["What is the return policy?", "", "a", "Räder für Kinder — 20 % Rabatt bis Sonntag",
         " ".join(["long text with many words"] * 200)] + [f"note {i}" for i in range(70)]


def test_vectors_equal_wordllama_inference():
    from safetensors import safe_open
    from tokenizers import Tokenizer
    from wordllama.inference import WordLlamaInference

    from kbframework.ingest.tokens import wordllama_dir

    root = wordllama_dir()
    tok = Tokenizer.from_file(str(root / "tokenizers" / "l2_supercat_tokenizer_config.json"))
    with safe_open(str(root / "weights" / "l2_supercat_256.safetensors"), framework="np") as f:
        reference = WordLlamaInference(f.get_tensor("embedding.weight"), tok)
    expected = reference.embed(TEXTS, norm=True, batch_size=64)
    got = np.array(WordLlamaEmbedder().embed_batch(TEXTS))
    assert got.shape == (len(TEXTS), 256)
    assert np.array_equal(np.nan_to_num(got), np.nan_to_num(expected))
