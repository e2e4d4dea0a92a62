"""Retrieval and answer: filters, hybrid search, fusion, prompt, cards, fallbacks."""
