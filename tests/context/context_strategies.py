"""Hypothesis strategies for random conversations, and the rules every model input must obey."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langmem_sqlite.context import TRUNCATION_MARKER, check_structure

WORDS = [
    "alpha",
    "beta",
    "数据",
    "gamma",
    "delta",
    "北京",
    "epsilon",
    "{json}",
    "[1, 2]",
    "def f(x):",
    "return x",
]


@st.composite
def texts(draw: Any, max_words: int = 60) -> str:
    return " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=max_words)))


@st.composite
def conversations(
    draw: Any, max_turns: int = 12, in_progress: bool | None = None
) -> list[BaseMessage]:
    """A well-formed conversation: turns of a human message (text or multimodal), tool steps
    (parallel calls with results in any order, or two interleaved AI calls), and answers;
    system messages may appear anywhere. The last turn may be in progress (ends on results)."""
    out: list[BaseMessage] = []
    n = 0

    def nid() -> str | None:
        nonlocal n
        n += 1
        return f"m{n}" if draw(st.integers(0, 9)) else None

    if draw(st.booleans()):
        out.append(SystemMessage(draw(texts(20)), id=nid()))
    turns = draw(st.integers(1, max_turns))
    for t in range(turns):
        if draw(st.integers(0, 9)) == 0:
            out.append(SystemMessage("note: " + draw(texts(8)), id=nid()))
        content: Any = draw(texts())
        if draw(st.integers(0, 5)) == 0:
            content = [
                {"type": "text", "text": content},
                {"type": "image_url", "image_url": {"url": "https://img/x.png"}},
            ]
        out.append(HumanMessage(content, id=nid()))
        for s in range(draw(st.integers(0, 3))):
            if draw(st.booleans()):
                k = draw(st.integers(1, 4))
                ids = [f"c{t}_{s}_{i}" for i in range(k)]
                out.append(
                    AIMessage(
                        draw(st.sampled_from(["", "let me check"])),
                        id=nid(),
                        tool_calls=[
                            {"name": "f", "args": {"i": i}, "id": c} for i, c in enumerate(ids)
                        ],
                    )
                )
                order = draw(st.permutations(ids))
            else:  # two AI messages whose calls are answered interleaved
                ids = [f"c{t}_{s}_a", f"c{t}_{s}_b"]
                for c in ids:
                    out.append(
                        AIMessage("", id=nid(), tool_calls=[{"name": "g", "args": {}, "id": c}])
                    )
                order = draw(st.permutations(ids))
            for c in order:
                out.append(ToolMessage(draw(texts(200)), tool_call_id=c, id=nid()))
        last = t == turns - 1
        if not (last and (in_progress or (in_progress is None and draw(st.booleans())))):
            out.append(AIMessage(draw(texts()), id=nid()))
    return out


def conv_of(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    return [m for m in messages if not isinstance(m, SystemMessage)]


def latest_human(messages: Sequence[BaseMessage]) -> BaseMessage | None:
    for m in reversed(messages):
        if m.type == "human":
            return m
    return None


def assert_valid_model_input(
    inp: Sequence[BaseMessage], out: Sequence[BaseMessage], *, summary_note: bool = False
) -> None:
    """The structural rules: non-empty, one system message first, no orphans or dangling
    calls, never starting on a tool result, the latest human message and everything after it
    present, and the conversation part a suffix of the input (tool results maybe shortened)."""
    assert out, "empty model input"
    assert check_structure(out) == [], check_structure(out)
    systems = [i for i, m in enumerate(out) if isinstance(m, SystemMessage)]
    assert systems in ([], [0])
    for s in inp:
        if isinstance(s, SystemMessage):
            assert systems == [0] and s.text in out[0].text
    conv_in, conv_out = conv_of(inp), conv_of(out)
    if summary_note and conv_out and conv_out[0].additional_kwargs.get("lc_source"):
        conv_out = conv_out[1:]
    assert len(conv_out) <= len(conv_in)
    tail = conv_in[len(conv_in) - len(conv_out) :]
    for a, b in zip(tail, conv_out, strict=True):
        if a is not b and a != b:
            assert a.type == "tool" and b.id == a.id and "removed to fit" in b.text, (a, b)
    human = latest_human(conv_in)
    if human is not None:
        assert any(m is human or m == human for m in conv_out), "latest human message dropped"


VIOLATION_KINDS = (
    "orphan tool result",
    "tool call without result",
    "more than one system message",
    "system message not first",
    "latest question missing",
    "summary missing after history was dropped",
)
"""The structural violations counted on every model input (tests and benchmark)."""


def violations(
    call: Sequence[BaseMessage],
    question: str,
    *,
    first_question: str | None,
    summary_seen: bool,
) -> list[str]:
    """The violations of one model input, by kind (:data:`VIOLATION_KINDS`).

    Args:
        call: the model input.
        question: the text of the turn's human message (it must be sent).
        first_question: the text of the thread's first human message: when it is missing the
            history was dropped, and then a summary must be present (``summary_seen``).
        summary_seen: whether the input carries a summary.
    """
    found: list[str] = []
    systems = [i for i, m in enumerate(call) if isinstance(m, SystemMessage)]
    if len(systems) > 1:
        found.append("more than one system message")
    if systems and systems[0] != 0:
        found.append("system message not first")
    pending: set[str] = set()
    for m in call:
        if m.type == "tool":
            cid = getattr(m, "tool_call_id", None)
            if cid not in pending:
                found.append("orphan tool result")
            pending.discard(cid)
        elif isinstance(m, AIMessage):
            pending.update(str(c["id"]) for c in m.tool_calls)
    if pending:
        found.append("tool call without result")
    texts = [m.text for m in call if m.type == "human"]
    if question not in texts:
        found.append("latest question missing")
    if first_question is not None and first_question not in texts and not summary_seen:
        found.append("summary missing after history was dropped")
    return found


_ZH_WORDS = [
    "请帮我",
    "检查",
    "这份合同",
    "供应商",
    "按时交付",
    "货物",
    "数据库",
    "查询结果",
    "风险评估",
    "第三季度",
    "审计",
    "发票",
    "订单",
    "库存",
    "付款计划",
    "北京",
    "上海",
    "客户",
    "投诉",
    "系统迁移",
    "备份",
    "成本",
    "报告",
    "，",
    "。",
    "；",
    "以及",
    "但是",
    "因此",
    "需要",
    "确认",
]


def zh_text(seed: int, chars: int) -> str:
    """About ``chars`` characters of Chinese (deterministic for ``seed``)."""
    rng = random.Random(seed)
    out: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(_ZH_WORDS)
        out.append(word)
        size += len(word)
    return "".join(out)


@st.composite
def hard_conversations(draw: Any, max_turns: int = 5) -> list[BaseMessage]:
    """Conversations of the hard shape, scaled down: Chinese only, long questions, one or two
    tool rounds of 1-5 parallel calls with long results (answered in any order); the last
    turn may be in progress."""
    out: list[BaseMessage] = []
    seeds = iter(range(draw(st.integers(0, 10**6)), 10**7))
    turns = draw(st.integers(1, max_turns))
    for t in range(turns):
        out.append(HumanMessage(zh_text(next(seeds), draw(st.integers(200, 9000))), id=f"h{t}"))
        for r in range(draw(st.integers(0, 2))):
            ids = [f"c{t}_{r}_{i}" for i in range(draw(st.integers(1, 5)))]
            calls = [
                {"name": "search", "args": {"query": zh_text(next(seeds), 12)}, "id": c}
                for c in ids
            ]
            out.append(AIMessage("", tool_calls=calls, id=f"a{t}_{r}"))
            for c in draw(st.permutations(ids)):
                text = zh_text(next(seeds), draw(st.integers(100, 6000)))
                out.append(ToolMessage(text, tool_call_id=c, id=f"t{c}"))
        if t < turns - 1 or draw(st.booleans()):
            out.append(AIMessage(zh_text(next(seeds), draw(st.integers(20, 600))), id=f"a{t}"))
    return out


def smallest_input(messages: Sequence[BaseMessage], counter: Any, system: str | None = None) -> int:
    """What a model input needs at least (computed here, independently of the policy): the
    system prompt and system messages, the latest human message and what follows it, tool
    results cut to their markers."""
    conv = conv_of(messages)
    human = latest_human(conv)
    start = conv.index(human) if human is not None else len(conv) - 1
    texts = ([system] if system else []) + [
        m.text for m in messages if isinstance(m, SystemMessage)
    ]
    out: list[BaseMessage] = [SystemMessage("\n\n".join(texts))] if texts else []
    for m in conv[start:]:
        if m.type == "tool":
            n = len(m.text)
            m = m.model_copy(update={"content": TRUNCATION_MARKER.format(removed=n, total=n)})
        out.append(m)
    return int(counter.count(out))


def call_points(conv: Sequence[BaseMessage]) -> list[int]:
    """Prefix ends at which an agent calls the model: after a human message, or after the last
    result of a tool batch."""
    points = []
    for i, m in enumerate(conv):
        nxt = conv[i + 1] if i + 1 < len(conv) else None
        if m.type == "human" or (m.type == "tool" and (nxt is None or nxt.type != "tool")):
            points.append(i + 1)
    return points
