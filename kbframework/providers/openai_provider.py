"""OpenAI-compatible providers through the official ``openai`` client.

Any server that speaks the protocol works (OpenAI, OpenRouter, Ollama, vLLM): set
``KB_LLM_BASE_URL`` and ``KB_LLM_MODEL``. Tests point it at a local protocol server.
"""
from __future__ import annotations

from typing import Callable, Optional

from kbframework.config import get_config
from kbframework.errors import EmbeddingError, LLMError
from kbframework.ingest.tokens import count_tokens
from kbframework.types import EmbeddingProvider, LLMProvider, LLMResult


def _client(timeout: float = 30.0):
    import openai

    cfg = get_config()
    return openai.OpenAI(api_key=cfg.openai_api_key or "not-needed", base_url=cfg.llm_base_url,
                         timeout=timeout, max_retries=0)


class OpenAIEmbedder(EmbeddingProvider):
    name = "openai"
    batch_size = 256
    needs_key = True

    DIMS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072,
            "text-embedding-ada-002": 1536}

    def __init__(self):
        self.model = get_config().openai_embedding_model
        self.dim = self.DIMS.get(self.model, 1536)

    def available(self) -> bool:
        cfg = get_config()
        return bool(cfg.openai_api_key or cfg.llm_base_url)

    def embed_batch(self, texts: list[str]) -> list:
        import openai

        try:
            res = _client().embeddings.create(model=self.model, input=list(texts))
        except openai.OpenAIError as exc:
            raise EmbeddingError(f"OpenAI embeddings failed: {exc}")
        self.last_usage = getattr(res, "usage", None)
        return [d.embedding for d in sorted(res.data, key=lambda d: d.index)]

    def count_tokens(self, text: str) -> int:
        return count_tokens(text)


class OpenAIChat(LLMProvider):
    name = "openai"
    needs_key = True
    supports_streaming = True

    def __init__(self):
        self.model = get_config().llm_model

    def available(self) -> bool:
        cfg = get_config()
        return bool(cfg.openai_api_key or cfg.llm_base_url)

    def complete(self, messages: list[dict], *, max_tokens: int = 600, temperature: float = 0.2,
                 stream: bool = False, on_token: Optional[Callable[[str], None]] = None,
                 json_mode: bool = False) -> LLMResult:
        import openai

        client = _client(timeout=60.0)
        kwargs = dict(model=self.model, messages=messages, max_tokens=max_tokens,
                      temperature=temperature)
        if json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        try:
            if stream and on_token is not None:
                parts: list[str] = []
                usage = None
                for ev in client.chat.completions.create(stream=True,
                                                         stream_options={"include_usage": True},
                                                         **kwargs):
                    if getattr(ev, "usage", None):
                        usage = ev.usage
                    for choice in ev.choices or []:
                        piece = choice.delta.content or ""
                        if piece:
                            parts.append(piece)
                            on_token(piece)
                text = "".join(parts)
                tin = usage.prompt_tokens if usage else sum(count_tokens(m["content"]) for m in messages)
                tout = usage.completion_tokens if usage else count_tokens(text)
                return LLMResult(text=text, model=self.model, tokens_in=tin, tokens_out=tout)
            res = client.chat.completions.create(**kwargs)
        except openai.OpenAIError as exc:
            raise LLMError(f"The language model did not answer: {type(exc).__name__}: {exc}")
        text = res.choices[0].message.content or ""
        usage = res.usage
        return LLMResult(text=text, model=res.model or self.model,
                         tokens_in=usage.prompt_tokens if usage else 0,
                         tokens_out=usage.completion_tokens if usage else 0)
