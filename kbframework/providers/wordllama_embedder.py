"""WordLlama: 256-d static embeddings, weights inside the wheel, thousands of texts a second.

``WordLlama.load()`` tries to download its tokenizer file although the wheel contains it,
so we load the tokenizer and the safetensors weights from the package folder directly, and
pool them here exactly as ``WordLlamaInference.embed(norm=True)`` does: importing the
package runs its ``__init__``, which pulls in pydantic and requests and costs a CLI call a
third of a second (tests/test_wordllama_embedder.py checks the vectors are identical).

The weights stay float16 in the file, mapped into memory, and a small call (a query) reads and
converts only the rows of its tokens: reading and converting the whole 32,000 × 256 table to
float32 cost a one-question ``kbf ask`` about 0.1 s before its first vector. Once the process
has embedded more texts than one pooling batch, counted over all its calls, it converts the
table once and keeps it, since pooling from float16 rows takes twice as long as from a float32
table: a worker embeds a load in parts of about ten texts each, which a rule per call never
saw as bulk work, so it pooled every part from float16 (a third of its embedding time).
"""
from __future__ import annotations

import json
import struct
import threading
from pathlib import Path

import numpy as np

from kbframework.errors import EmbeddingError
from kbframework.ingest.tokens import count_tokens, wordllama_dir, wordllama_tokenizer
from kbframework.types import EmbeddingProvider

WEIGHTS = "embedding.weight"
DTYPES = {"F16": np.float16, "F32": np.float32}
POOL_BATCH = 64  # texts tokenized and pooled together


def map_tensor(path: Path, name: str) -> np.ndarray:
    """One tensor of a safetensors file as a read-only memory map. The format is a little-endian
    u64 header length, that many bytes of JSON (dtype, shape, byte offsets after the header),
    then the raw data; safetensors' own ``get_tensor`` would copy the whole table."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    try:
        info = header[name]
        dtype = DTYPES[info["dtype"]]
    except KeyError:
        raise EmbeddingError(f"{path.name} has no {name} in a dtype this embedder reads") from None
    start, end = info["data_offsets"]
    shape = tuple(info["shape"])
    if end - start != int(np.prod(shape)) * np.dtype(dtype).itemsize:
        raise EmbeddingError(f"{path.name}: the size of {name} does not match its shape")
    mapped = np.memmap(path, dtype=np.dtype(dtype).newbyteorder("<"), mode="r", offset=8 + n + start, shape=shape)
    return np.asarray(mapped)  # a plain array over the map: slices and vectors are ndarrays, not memmaps


class WordLlamaEmbedder(EmbeddingProvider):
    name = "wordllama"
    model = "wordllama-l2_supercat-256"
    dim = 256
    batch_size = 256
    is_offline = True
    cost_per_1k_tokens = 0.0

    def __init__(self):
        self._weights = None  # the mapped float16 table
        self._table = None  # the float32 copy, once bulk work has paid for it
        self._embedded = 0  # texts embedded so far, over every call
        self._lock = threading.Lock()

    def _load(self, texts: int = 0):
        with self._lock:
            if self._weights is None:
                root, tok = wordllama_dir(), wordllama_tokenizer()
                if root is None or tok is None:
                    raise EmbeddingError("WordLlama is not installed (or its tokenizer file is missing)")
                tok.enable_padding()
                tok.no_truncation()
                self._weights = map_tensor(root / "weights" / "l2_supercat_256.safetensors", WEIGHTS)
            self._embedded += texts
            if self._table is None and self._embedded > POOL_BATCH:
                self._table = np.ascontiguousarray(self._weights.astype(np.float32))
        return (self._weights if self._table is None else self._table), wordllama_tokenizer()

    def available(self) -> bool:
        return wordllama_dir() is not None

    def embed_batch(self, texts: list[str]) -> list:
        weights, tok = self._load(len(texts))
        out = []
        # without the character offsets, which pooling never reads (a quarter of the tokenizer's time)
        encode = getattr(tok, "encode_batch_fast", tok.encode_batch)
        for i in range(0, len(texts), POOL_BATCH):
            enc = encode(list(texts[i:i + POOL_BATCH]), is_pretokenized=False, add_special_tokens=False)
            ids = np.array([e.ids for e in enc], dtype=np.int32)
            mask = np.array([e.attention_mask for e in enc], dtype=np.float32)
            np.clip(ids, 0, weights.shape[0] - 1, out=ids)
            rows = weights[ids].astype(np.float32, copy=False)  # float16 -> float32 is exact: same vectors
            summed = np.sum(rows * mask[..., np.newaxis], axis=1, dtype=np.float32)
            pooled = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1.0).astype(np.float32)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            # a text without tokens (the empty string) pools to zeros: it stays the zero vector
            # instead of 0/0 = NaN, which pgvector refuses and which would poison every distance
            np.divide(pooled, norms, out=pooled, where=norms > 0)
            out.extend(pooled)
        return out

    def count_tokens(self, text: str) -> int:
        return count_tokens(text)
