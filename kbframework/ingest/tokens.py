"""Token counting without network access.

tiktoken fetches its encodings on first use, so we count with the tokenizer that ships
inside the WordLlama wheel (a Llama-2 SentencePiece vocabulary); if that is unavailable,
an honest estimate of four characters per token.
"""
from __future__ import annotations

import functools
import importlib.util
import logging
import re
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


COUNT_BATCH = 256


def count_tokens_batch(texts: list[str]) -> list[int]:
    """Counts for many texts in few tokenizer calls. Texts of similar length go together
    because the embedder switches padding on in the shared tokenizer (every text of a call
    is padded to the longest); offsets are not computed (``encode_batch_fast``), counting
    needs none. Together that is several times cheaper than one ``encode_batch`` per text."""
    tok = wordllama_tokenizer()
    if tok is None:
        return [max(1, len(t) // 4) for t in texts]
    encode = getattr(tok, "encode_batch_fast", tok.encode_batch)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out = [0] * len(texts)
    for start in range(0, len(order), COUNT_BATCH):
        idx = order[start:start + COUNT_BATCH]
        for i, enc in zip(idx, encode([texts[i] for i in idx], add_special_tokens=False)):
            out[i] = sum(enc.attention_mask)
    return out


def count_tokens(text: str) -> int:
    return count_tokens_batch([text])[0]


_PIECE = re.compile("\u2581*[^\u2581]+|\u2581+")
_PIECE_CACHE_MAX = 200_000
# the normalizer the piece counter replays in Python (the tokenizer's own normalize_str, which
# tracks offsets, took four times as long as the counting itself)
_NORMALIZER = 'Sequence(normalizers=[Prepend(prepend="\u2581"), Replace(pattern=String(" "), content="\u2581")])'
_PROBES = ("", " ", "a b", "  two  spaces ", "tab\tand\nnew line", "\u2581already",
           "\u00e9t\u00e9 \u4e2d\u6587 \U0001f600")


def _normalize(text: str) -> str:
    return "\u2581" + text.replace(" ", "\u2581") if text else ""


class _PieceCounter:
    """Exact BPE counts from cached counts of word pieces, for the chunker's many texts.

    This tokenizer has no pre-tokenizer: after normalizing (spaces become ``▁``) it runs BPE
    over a whole paragraph at once, which costs as much as the embedding itself. No token of
    its vocabulary holds a ``▁`` after another character, so no token, and no merge, spans
    the point before a ``▁`` that follows a non-``▁``: the normalized text cut at those points
    gives pieces that BPE treats independently, and the text's count is the sum of its
    pieces' counts. Pieces repeat (they are words), so each is tokenized once and cached.
    ``available`` is false unless the tokenizer is of that kind; a text holding an added
    token (``<s>``), which the tokenizer splits out before normalizing, is counted whole."""

    def __init__(self, tok):
        self.tok = tok
        self.cache: dict[str, int] = {}  # piece of the normalized text → its count
        self.words: dict[str, int] = {}  # word → the count of ▁ + word
        self.added = [t.content for t in tok.get_added_tokens_decoder().values()]
        self.marks = {a[0] for a in self.added if a}
        model = tok.model
        self.available = (tok.pre_tokenizer is None and type(model).__name__ == "BPE"
                          and getattr(model, "dropout", None) is None and repr(tok.normalizer) == _NORMALIZER
                          and all(tok.normalizer.normalize_str(t) == _normalize(t) for t in _PROBES)
                          and not any("\u2581" in t.lstrip("\u2581") for t in tok.get_vocab()))

    def count(self, texts: list[str]) -> list[int]:
        """Most texts have single spaces only and no ``▁`` of their own: their pieces are then
        ``▁`` + each word, found by ``str.split`` and cached by the word."""
        words, cache, tokenize, out, whole = self.words, self.cache, self.tok.model.tokenize, [], []
        if len(cache) + len(words) > _PIECE_CACHE_MAX:
            cache.clear()
            words.clear()
        for i, t in enumerate(texts):
            if not t:
                out.append(0)
                continue
            if any(m in t for m in self.marks) and any(a in t for a in self.added):
                whole.append(i)
                out.append(0)
                continue
            parts = t.split(" ")
            if "\u2581" in t or "" in parts:  # leading, trailing or repeated spaces: cut the normalized text
                parts, table, key = _PIECE.findall(_normalize(t)), cache, str
            else:
                table, key = words, "\u2581".__add__
            try:
                out.append(sum(map(table.__getitem__, parts)))
            except KeyError:
                for p in parts:
                    if p not in table:
                        table[p] = len(tokenize(key(p)))
                out.append(sum(map(table.__getitem__, parts)))
        if whole:
            for i, n in zip(whole, count_tokens_batch([texts[i] for i in whole])):
                out[i] = n
        return out


@functools.lru_cache(maxsize=1)
def _piece_counter() -> _PieceCounter | None:
    tok = wordllama_tokenizer()
    if tok is None:
        return None
    counter = _PieceCounter(tok)
    if not counter.available:
        log.info("the tokenizer is not of the kind piece counting assumes; counting whole texts")
        return None
    return counter


def count_tokens_many(texts: list[str]) -> list[int]:
    """The same counts as ``count_tokens_batch``, several times faster for many texts of the
    same language (the chunker's paragraphs): see ``_PieceCounter``."""
    counter = _piece_counter()
    return counter.count(texts) if counter is not None else count_tokens_batch(texts)


Counter = Callable[[list[str]], list[int]]
