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


def usable_vector(vec) -> bool:
    """Can cosine similarity use this vector? Not when a value is NaN or infinite (pgvector
    refuses those) nor when all are zero (no direction: every distance to it is NaN)."""
    v = np.asarray(vec, dtype=np.float32)
    return v.size > 0 and bool(np.isfinite(v).all()) and bool(v.any())


def embed_texts(provider, texts: list[str], *, attempts: int = 3) -> np.ndarray:
    """Embed every text or raise EmbeddingError; never returns a partial result, nor a vector
    cosine similarity cannot use (the chunks table would store it, and search would rank it)."""
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
    vecs = np.asarray(out, dtype=np.float32)
    bad = np.flatnonzero(~(np.isfinite(vecs).all(axis=1) & vecs.any(axis=1)))
    if bad.size:
        first = int(bad[0])
        raise EmbeddingError(
            f"{provider.name} ({provider.model}) returned {bad.size} vector(s) without a direction "
            f"(NaN, infinite or all zeros), first for text {first + 1} of {len(texts)} "
            f"({texts[first][:60]!r}); nothing was stored.")
    return vecs
