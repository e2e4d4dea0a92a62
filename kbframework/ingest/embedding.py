"""Batched embedding with retries and exponential backoff (all or nothing)."""
from __future__ import annotations

import logging
import os
import time

import numpy as np

from kbframework.errors import EmbeddingError

log = logging.getLogger("kbframework.ingest")


def _retry_base() -> float:
    return float(os.environ.get("KB_EMBED_RETRY_BASE", "0.5"))


def embed_texts(provider, texts: list[str], *, attempts: int = 3) -> np.ndarray:
    """Embed every text or raise EmbeddingError; never returns a partial result."""
    out: list = []
    bs = max(1, getattr(provider, "batch_size", 64))
    for i in range(0, len(texts), bs):
        batch = texts[i:i + bs]
        delay = _retry_base()
        for attempt in range(1, attempts + 1):
            try:
                vecs = provider.embed_batch(batch)
                if len(vecs) != len(batch):
                    raise EmbeddingError(f"provider returned {len(vecs)} vectors for {len(batch)} texts")
                out.extend(vecs)
                break
            except Exception as exc:
                if attempt == attempts:
                    raise EmbeddingError(
                        f"Embedding with {provider.name} ({provider.model}) failed after "
                        f"{attempts} attempts: {exc}") from exc
                log.warning("embedding batch failed (attempt %s/%s): %s", attempt, attempts, exc)
                time.sleep(delay)
                delay *= 2
    if not out:
        return np.zeros((0, getattr(provider, "dim", 1)), dtype=np.float32)
    return np.asarray(out, dtype=np.float32)
