"""Recording fake chat models for the context-window tests and benchmark (no network).

* :class:`AgentModel`: an agent's main model. It records every input; for a human message
  ending in ``[tools:N]`` it answers with N parallel tool calls, after tool results (or other
  messages) with a text answer of about ``answer_words`` words.
* :class:`RecordingSummarizer`: records every input; returns ``"fixed"`` summaries of a set size
  or ``"append"`` ones (the previous summary plus new text), or raises when ``fail`` is set.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from langmem_sqlite.context.summary import COMPACTION_INSTRUCTIONS

__all__ = [
    "AgentModel",
    "RecordingModel",
    "RecordingSummarizer",
    "human_turns",
    "is_compaction",
    "run_agent_loop",
]

_WORDS = [
    "the",
    "service",
    "keeps",
    "every",
    "message",
    "in",
    "order",
    "and",
    "reads",
    "only",
    "the",
    "recent",
    "window",
    "when",
    "a",
    "model",
    "call",
    "needs",
    "it",
    "数据库",
    "查询",
    "结果",
    "while",
    "tool",
    "results",
    "carry",
    "JSON",
    "payloads",
    "with",
    "ids",
    "and",
    "scores",
]

_TOOLS_RE = re.compile(r"\[tools:(\d+)\]")


class RecordingModel(BaseChatModel):
    """Base of the fakes: records every input and answers with :meth:`reply`."""

    calls: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return type(self).__name__

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> RecordingModel:  # type: ignore[override]
        return self

    def reply(self, messages: list[BaseMessage]) -> AIMessage:
        """The answer to the latest input (``self.calls[-1]``)."""
        raise NotImplementedError

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=self.reply(messages))])


class AgentModel(RecordingModel):
    """A scripted agent model that records its inputs."""

    answer_words: int = 60
    tool_names: list[str] = Field(default_factory=lambda: ["lookup"])
    seed: int = 0

    def reply(self, messages: list[BaseMessage]) -> AIMessage:
        n = len(self.calls)
        rng = random.Random(self.seed * 100_003 + n)
        last = messages[-1]
        wanted = _TOOLS_RE.search(last.text) if isinstance(last, HumanMessage) else None
        if wanted and int(wanted.group(1)) > 0:
            calls = [
                {
                    "name": self.tool_names[i % len(self.tool_names)],
                    "args": {"query": " ".join(rng.choices(_WORDS, k=4)), "k": i + 1},
                    "id": f"call_{n}_{i}",
                    "type": "tool_call",
                }
                for i in range(int(wanted.group(1)))
            ]
            return AIMessage("", tool_calls=calls, id=f"ai-{n}")
        words = " ".join(rng.choices(_WORDS, k=self.answer_words))
        return AIMessage(f"Answer {n}: {words}", id=f"ai-{n}")


def is_compaction(messages: Sequence[BaseMessage]) -> bool:
    """A summarizer input asking to shorten the summary (not to merge new messages)."""
    return COMPACTION_INSTRUCTIONS.split("{")[0] in messages[0].text


class RecordingSummarizer(RecordingModel):
    """A summarizer that records its inputs."""

    mode: str = "fixed"
    words: int = 150
    fail: bool = False

    @staticmethod
    def previous(messages: Sequence[BaseMessage]) -> str | None:
        """The previous summary found in a summarizer input."""
        text = messages[-1].text
        match = re.search(r"<previous_summary>\n(.*?)\n</previous_summary>", text, re.S)
        if match is None or match.group(1) == "(none yet)":
            return None
        return match.group(1)

    def reply(self, messages: list[BaseMessage]) -> AIMessage:
        if self.fail:
            raise RuntimeError("summarizer unavailable")
        n = len(self.calls)
        rng = random.Random(n)
        new = f"[pass {n}] " + " ".join(rng.choices(_WORDS, k=self.words))
        prev = self.previous(messages)
        return AIMessage(f"{prev}\n{new}" if self.mode == "append" and prev else new)


def tool_result(call_id: str, size: int = 40, seed: int = 0) -> ToolMessage:
    """A JSON-ish tool result of about ``size`` words."""
    rng = random.Random(seed)
    return ToolMessage(" ".join(rng.choices(_WORDS, k=size)), tool_call_id=call_id)


def human_turns(n: int, seed: int = 0, words: int = 40) -> list[HumanMessage]:
    """``n`` user messages; about a third ask for 1-3 parallel tool calls."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        tools = rng.choice([0, 0, 1, 2, 3])
        text = f"Question {i}: " + " ".join(rng.choices(_WORDS, k=words))
        out.append(HumanMessage(f"{text} [tools:{tools}]", id=f"h-{seed}-{i}"))
    return out


def run_agent_loop(
    policy: Any, model: AgentModel, turns: int, *, seed: int = 0, result_words: int = 60
) -> list[Any]:
    """Drive ``policy`` like an agent (no graph): per model call, prepare the input with the
    summary record in force, call the model, run its tool calls. Returns every ContextResult,
    each with ``.history`` (the full history at that call) attached."""
    history: list[BaseMessage] = []
    record = None
    results = []
    for h in human_turns(turns, seed):
        history.append(h)
        while True:
            res = policy.prepare(list(history), record)
            res.history = list(history)
            results.append(res)
            record = res.record
            reply = model.invoke(res.messages)
            history.append(reply)
            if not reply.tool_calls:
                break
            for k, tc in enumerate(reply.tool_calls):
                msg = tool_result(tc["id"], result_words, seed=len(history) + k)
                history.append(msg.model_copy(update={"id": f"t-{len(history)}"}))
    return results
