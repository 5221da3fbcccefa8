"""Candidate facts extracted from a conversation by a chat model, for
[`UserFacts.propose`][langmem_sqlite.store.facts.UserFacts.propose] to keep pending until
confirmed."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from ..messages.checks import check_messages
from .facts import MAX_FACT_CHARS

__all__ = ["EXTRACTION_PROMPT", "aextract_candidate_facts", "extract_candidate_facts"]


EXTRACTION_PROMPT = (
    "You extract lasting facts a user states about themselves (name, how to address them, "
    "diet, preferences, answer style, location, profession) from a conversation. Only "
    "facts the user said explicitly and that will matter in future conversations; never "
    "guesses, never facts about other people, never one-off requests. Write each fact as a "
    "short sentence about 'the user'. Reply with ONLY a JSON array of strings; reply [] if "
    "there is nothing certain."
)
"""The system prompt of
[`extract_candidate_facts`][langmem_sqlite.store.extract_candidate_facts]."""


def _extraction_input(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    lines = [
        f"{m.type}: {m.text}"
        for m in check_messages(messages)
        if m.type in ("human", "ai") and m.text
    ]
    return [SystemMessage(EXTRACTION_PROMPT), HumanMessage("\n".join(lines))]


def _parse_candidates(reply: BaseMessage) -> list[str]:
    """The strings of a JSON array reply; anything else yields nothing."""
    text = reply.text.strip()
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", text, re.DOTALL)
    try:
        data = json.loads(fenced.group(1) if fenced else text)
    except ValueError:
        return []
    if not isinstance(data, list):
        return []
    return [
        " ".join(entry.split())
        for entry in data
        if isinstance(entry, str) and entry.strip() and len(entry) <= MAX_FACT_CHARS
    ]


def extract_candidate_facts(model: Any, messages: Sequence[BaseMessage]) -> list[str]:
    """Ask a chat model for candidate facts in `messages`; pass them to
    [`UserFacts.propose`][langmem_sqlite.store.facts.UserFacts.propose] to keep them pending until
    confirmed."""
    return _parse_candidates(model.invoke(_extraction_input(messages)))


async def aextract_candidate_facts(model: Any, messages: Sequence[BaseMessage]) -> list[str]:
    """Async [`extract_candidate_facts`][langmem_sqlite.store.extract_candidate_facts]."""
    return _parse_candidates(await model.ainvoke(_extraction_input(messages)))
