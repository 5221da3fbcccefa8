"""The offline stand-in model: rule-based, deterministic, and NOT a language model."""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool

OFFLINE_LABEL = "offline rule-based stand-in (not an LLM)"
"""How the chat and the notebooks name this model."""

_PREFIX = "[offline]"
_MAX_SUMMARY_LINES = 12

# What a user states -> the fact stored, and how it is found again in facts or text.
_STATEMENTS: list[tuple[str, re.Pattern[str], str]] = [
    (
        "name",
        re.compile(r"\b(?:my name is|call me)\s+([^\W\d_][\w-]*)", re.I),
        "The user's name is {}.",
    ),
    (
        "city",
        # a place: its first word in any case or script, then words that do not start in
        # lower case ("New York", "Kyoto 京都")
        re.compile(r"(?i:\bI live in)\s+([^\W\d_][\w-]*(?: (?![a-zß-ÿ])[^\W\d_][\w-]*)*)"),
        "The user lives in {}.",
    ),
    (
        "likes",
        re.compile(r"\bI (?:like|love|prefer)\s+(.+?)(?=[.,!?。，！？]| and I\b|$)", re.I),
        "The user likes {}.",
    ),
]
_FACT_FORMS: dict[str, re.Pattern[str]] = {
    "name": re.compile(r"The user's name is ([\w-]+)"),
    "city": re.compile(r"The user lives in ([\w -]+?)\."),
    "likes": re.compile(r"The user likes ([^.]+)\."),
}
_REMEMBER = re.compile(r"^\s*remember(?: that)?\s+(.+?)\s*$", re.I)
_QUESTIONS: list[tuple[str, re.Pattern[str], str]] = [
    ("name", re.compile(r"\bwhat(?:'s| is) my name\b|\bwho am i\b", re.I), "your name is {}"),
    ("city", re.compile(r"\bwhere do i live\b", re.I), "you live in {}"),
    ("likes", re.compile(r"\bwhat do i (?:like|love|prefer)\b", re.I), "you like {}"),
]
_SUMMARY_BLOCK = re.compile(r"<conversation_summary>(.*?)</conversation_summary>", re.S)
_FACTS_BLOCK = re.compile(r"<user_facts>(.*?)</user_facts>", re.S)
_HUMAN_XML = re.compile(r'<message type="human">(.*?)</message>', re.S)


def _statement_facts(text: str) -> list[tuple[str, str]]:
    """(kind, fact sentence) for each simple fact stated in `text`."""
    found = []
    for kind, pattern, form in _STATEMENTS:
        for value in pattern.findall(text):
            found.append((kind, form.format(value.strip())))
    if not found and (m := _REMEMBER.match(text)):
        found.append(("note", m.group(1).rstrip(".") + "."))
    return found


def _find(kind: str, fact_text: str, other_texts: Sequence[str]) -> str | None:
    """The latest value of `kind` in the fact lines, else in `other_texts` (newest last)."""
    hits = _FACT_FORMS[kind].findall(fact_text)
    if hits:
        return str(hits[-1]).strip()
    pattern = next(p for k, p, _ in _STATEMENTS if k == kind)
    for text in reversed(other_texts):
        values = pattern.findall(text)
        if values:
            return str(values[-1]).strip()
    return None


class OfflineChatModel(BaseChatModel):
    """A deterministic, rule-based chat model for offline demos and tests (not an LLM).

    It answers only from what it is sent, so a correct recall proves the memory was loaded:
    it calls `remember_fact` for a simple stated fact ("my name is Ada", "I live in Lyon",
    "I like green tea", "remember that ..."), answers "what is my name?", "where do I live?",
    "what do I like?" naming where it found the answer, and summarizes extractively as a
    `ContextPolicy` summarizer. Every answer starts with `[offline]`.
    """

    model_name: str = "offline"

    @property
    def _llm_type(self) -> str:
        return "langmem-sqlite-offline"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        """Bind tools (only `remember_fact` is ever called)."""
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        names = {t.get("function", {}).get("name") for t in kwargs.get("tools") or []}
        reply = respond(messages, can_remember="remember_fact" in names)
        return ChatResult(generations=[ChatGeneration(message=reply)])


def respond(messages: Sequence[BaseMessage], *, can_remember: bool = False) -> AIMessage:
    """The offline model's reply to `messages`."""
    if not messages:
        return AIMessage(f"{_PREFIX} (nothing was sent)")
    system = messages[0] if isinstance(messages[0], SystemMessage) else None
    system_text = system.text if system else ""
    last = messages[-1]
    if "<new_messages>" in last.text and "summary" in system_text.lower():
        return AIMessage(_summarize(last.text))
    if isinstance(last, ToolMessage):
        return AIMessage(f"{_PREFIX} Saved to long-term memory: {_called_facts(messages)}")
    question = last.text
    facts_match = _FACTS_BLOCK.search(system_text)
    fact_text = facts_match.group(1) if facts_match else ""
    summary_match = _SUMMARY_BLOCK.search(system_text)
    summary_text = summary_match.group(1) if summary_match else ""
    earlier = [m.text for m in messages[:-1] if m.type == "human"]
    for kind, pattern, form in _QUESTIONS:
        if pattern.search(question):
            return AIMessage(_answer(kind, form, fact_text, summary_text, earlier))
    asked = question.rstrip().endswith("?")  # "Do I like tea?" states nothing
    stated = [] if asked else [(k, f) for k, f in _statement_facts(question) if f not in fact_text]
    if stated and can_remember:
        calls = [
            {"name": "remember_fact", "args": {"fact": fact}, "id": f"call_{uuid.uuid4().hex[:12]}"}
            for _, fact in stated
        ]
        return AIMessage("", tool_calls=calls)
    n_facts = fact_text.count("\n- ") + fact_text.startswith("- ")
    sent = len(messages)
    parts = [f"I was sent {sent} message{'' if sent == 1 else 's'}"]
    if summary_text:
        parts.append("a summary of earlier turns")
    if n_facts:
        parts.append(f"{n_facts} remembered fact{'' if n_facts == 1 else 's'}")
    return AIMessage(
        f"{_PREFIX} Got it. ({', '.join(parts)}. I am not an LLM: ask me 'what is my name?' "
        "or 'where do I live?' to see what memory holds.)"
    )


def _called_facts(messages: Sequence[BaseMessage]) -> str:
    """The facts of the latest `remember_fact` calls."""
    for m in reversed(messages):
        if isinstance(m, AIMessage) and m.tool_calls:
            return " ".join(str(c["args"].get("fact", "")) for c in m.tool_calls)
    return ""


def _answer(kind: str, form: str, facts: str, summary: str, earlier: Sequence[str]) -> str:
    for source, value in (
        ("long-term facts", _find(kind, facts, [])),
        ("the conversation summary", _find(kind, "", [summary])),
        ("the recent messages", _find(kind, "", earlier)),
    ):
        if value:
            text = form.format(value)
            return f"{_PREFIX} {text[0].upper()}{text[1:]} (found in {source})."
    return f"{_PREFIX} I don't know: nothing I was sent says."


def _summarize(prompt: str) -> str:
    """Extractive summary: the previous summary's lines plus the user's new statements."""
    previous = re.search(r"<previous_summary>\n(.*?)\n</previous_summary>", prompt, re.S)
    lines = []
    if previous and previous.group(1).strip() != "(none yet)":
        lines = [ln for ln in previous.group(1).splitlines() if ln.strip()]
    for said in _HUMAN_XML.findall(prompt):
        said = " ".join(said.split())
        if said and not said.endswith("?"):
            line = f"- The user said: {said}"
            if line not in lines:
                lines.append(line)
    return "\n".join(lines[-_MAX_SUMMARY_LINES:]) or "- (nothing stated yet)"
