"""A deterministic embedding for fact tests: one dimension per topic word."""

from __future__ import annotations

from langchain_core.embeddings import Embeddings


class TopicEmbedding(Embeddings):
    """Scores a text on each of `TOPICS` by whether the word occurs in it."""

    TOPICS = ("food", "name", "style")

    def _vec(self, text: str) -> list[float]:
        t = text.lower()
        return [float(w in t) + 0.01 for w in self.TOPICS]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vec(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vec(text)
