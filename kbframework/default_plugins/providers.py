"""Default model providers: WordLlama and OpenAI embeddings; OpenAI-compatible chat and the
offline extractive answerer. Imported when the providers are first asked for, not before."""
from kbframework.hooks.markers import hookimpl


@hookimpl(trylast=True)
def kb_embedding_providers():
    from kbframework.providers.openai_provider import OpenAIEmbedder
    from kbframework.providers.wordllama_embedder import WordLlamaEmbedder

    return [WordLlamaEmbedder(), OpenAIEmbedder()]


@hookimpl(trylast=True)
def kb_llm_providers():
    from kbframework.providers.extractive import ExtractiveAnswerer
    from kbframework.providers.openai_provider import OpenAIChat

    return [OpenAIChat(), ExtractiveAnswerer()]
