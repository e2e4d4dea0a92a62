"""Default model providers: WordLlama and OpenAI embeddings; OpenAI-compatible chat and the
offline extractive answerer."""
from kbframework.hooks.markers import hookimpl
from kbframework.providers.extractive import ExtractiveAnswerer
from kbframework.providers.openai_provider import OpenAIChat, OpenAIEmbedder
from kbframework.providers.wordllama_embedder import WordLlamaEmbedder


@hookimpl(trylast=True)
def kb_embedding_providers():
    return [WordLlamaEmbedder(), OpenAIEmbedder()]


@hookimpl(trylast=True)
def kb_llm_providers():
    return [OpenAIChat(), ExtractiveAnswerer()]
