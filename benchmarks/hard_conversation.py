"""A hard agent conversation for the context-window benchmark and tests (deterministic).

Chinese only (questions, tool arguments and results, answers, summaries); per turn a question
of 2,500-3,800 exact gpt-4o tokens, then two tool rounds of 3-5 parallel calls whose results
are 3,000-8,000 tokens each, then the answer. One turn (``oversized_at``) asks a question
larger than the whole budget: a correct policy refuses it with a clear error and stores
nothing of it, and the conversation goes on.

Also here: the scripted agent model replaying it (:class:`ScriptedAgent`), its tools, and a
Chinese summarizer (:class:`ChineseSummarizer`) whose every line carries a tag, so a summary
(whole or shortened) is recognised in any model input.
"""

from __future__ import annotations

import random
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import Field

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from context_fakes import RecordingModel

from langmem_sqlite.messages.counting import resolve_message_counter

__all__ = [
    "HARD_BUDGET",
    "SUMMARY_TAG",
    "SYSTEM_ZH",
    "TOOL_NAMES",
    "ChineseSummarizer",
    "ScriptedAgent",
    "Turn",
    "hard_conversation",
    "make_tools",
]

HARD_BUDGET = 4_500
"""The budget the conversation is run at. Its largest turns need up to about 4,250 tokens at
their smallest (system prompt, question, tool calls, tool results cut to their markers): every
turn but the oversized one fits, and the summary (up to 562 tokens) at times does not fit whole
beside it."""

SYSTEM_ZH = (
    "你是一名严谨的研究助理，负责为审计团队整理资料。请先使用工具检索档案、订单和报告，"
    "再用中文给出简明、准确的结论，并注明依据来自哪一次检索。"
)
TOOL_NAMES = ("search_archive", "query_orders", "read_report")
SUMMARY_TAG = "〔摘要"

_DIGITS = "零一二三四五六七八九"
_SUBJECTS = [
    "华东分公司",
    "财务部",
    "审计组",
    "采购中心",
    "物流部门",
    "第三方供应商",
    "董事会",
    "风控委员会",
    "客户服务中心",
    "信息技术部",
    "市场部",
    "法务部",
    "仓储团队",
    "销售大区",
    "研发中心",
    "质检小组",
]
_VERBS = [
    "完成了",
    "推迟了",
    "重新评估了",
    "提交了",
    "核对了",
    "否决了",
    "批准了",
    "调整了",
    "记录了",
    "发现了",
    "整理了",
    "复核了",
    "暂停了",
    "启动了",
    "汇总了",
    "上报了",
]
_OBJECTS = [
    "季度预算",
    "库存盘点",
    "合同条款",
    "付款计划",
    "供应链风险",
    "发票差异",
    "客户投诉",
    "系统迁移",
    "数据备份",
    "成本分析",
    "交付进度",
    "质量报告",
    "采购订单",
    "应收账款",
    "资产折旧",
    "税务申报",
]
_DETAILS = [
    "其中涉及的金额较上月明显增加",
    "相关凭证已经归档到共享目录",
    "负责人表示需要进一步核实",
    "部分数据与上一版本存在出入",
    "审批流程比原计划多用了两周",
    "初步判断与汇率波动有关",
    "需要在下次例会上重点讨论",
    "现场检查没有发现重大问题",
    "外部顾问提出了不同意见",
    "历史记录显示类似问题曾经出现",
    "整改措施已经落实到具体岗位",
    "预计下个季度才能全部完成",
]
_PLACES = ["北京", "上海", "广州", "深圳", "成都", "杭州", "武汉", "西安", "南京", "重庆"]

_EXACT = resolve_message_counter("gpt-4o")


def _number(n: int) -> str:
    """``n`` in Chinese digits (一二三...)."""
    return "".join(_DIGITS[int(d)] for d in str(n))


def _sentence(rng: random.Random) -> str:
    return (
        f"{rng.choice(_PLACES)}{rng.choice(_SUBJECTS)}在第{_number(rng.randint(1, 4))}季度"
        f"{rng.choice(_VERBS)}{rng.choice(_OBJECTS)}，涉及{_number(rng.randint(2, 999))}项记录，"
        f"{rng.choice(_DETAILS)}。"
    )


def _tokens(text: str) -> int:
    return _EXACT.uncached(HumanMessage(text)) - _EXACT(HumanMessage(""))


def _text(rng: random.Random, head: str, tokens: int) -> str:
    """Chinese text of ``tokens`` exact gpt-4o tokens (within a sentence), starting ``head``."""
    parts, used = [head], _tokens(head)
    while used < tokens:
        s = _sentence(rng)
        parts.append(s)
        used += _tokens(s)
    text = "".join(parts)
    while _tokens(text) > tokens and len(parts) > 2:  # boundaries merge a little: trim back
        parts.pop()
        text = "".join(parts)
    return text


@dataclass
class Turn:
    """One turn: the question, the tool rounds (parallel calls), their results, the answer."""

    human: HumanMessage
    rounds: list[list[dict[str, Any]]] = field(default_factory=list)
    results: dict[str, str] = field(default_factory=dict)
    answer: str = ""
    oversized: bool = False


def hard_conversation(
    turns: int = 24,
    *,
    seed: int = 13,
    budget: int = HARD_BUDGET,
    oversized_at: int | None = None,
    question_tokens: tuple[int, int] = (2_500, 3_800),
    result_tokens: tuple[int, int] = (3_000, 8_000),
    calls: tuple[int, int] = (3, 5),
    tool_rounds: int = 2,
) -> list[Turn]:
    """The script (see the module docstring). ``oversized_at`` (default: the middle turn)
    asks a question of ``budget + 600`` tokens; ``-1`` for none."""
    rng = random.Random(seed)

    def size(lo_hi: tuple[int, int]) -> int:  # a text ends up to a sentence under its target
        return rng.randint(min(lo_hi[0] + 60, lo_hi[1]), lo_hi[1])

    if oversized_at is None:
        oversized_at = turns // 2
    script = []
    for t in range(turns):
        big = t == oversized_at
        target = budget + 600 if big else size(question_tokens)
        question = _text(rng, f"第{_number(t)}轮问题：请结合下面的材料判断风险并给出建议。", target)
        turn = Turn(HumanMessage(question, id=f"h{t}"), oversized=big)
        for r in range(tool_rounds):
            batch = []
            for i in range(rng.randint(*calls)):
                name = TOOL_NAMES[(t + r + i) % len(TOOL_NAMES)]
                query = f"第{_number(t)}轮第{_number(r + 1)}次检索第{_number(i + 1)}项：{rng.choice(_OBJECTS)}"
                batch.append({"name": name, "args": {"query": query}, "id": f"c{t}_{r}_{i}"})
                head = f"检索结果（{query}）："
                turn.results[query] = _text(rng, head, size(result_tokens))
            turn.rounds.append(batch)
        turn.answer = _text(rng, f"第{_number(t)}轮结论：", rng.randint(150, 400))
        script.append(turn)
    return script


def make_tools(script: Sequence[Turn]) -> list[BaseTool]:
    """The script's tools (every name its calls use); each returns the scripted result of
    its query."""
    results = {q: r for turn in script for q, r in turn.results.items()}
    names = sorted({c["name"] for turn in script for batch in turn.rounds for c in batch})

    def tool_for(name: str) -> BaseTool:
        def run(query: str) -> str:
            return results[query]

        return StructuredTool.from_function(
            func=run, name=name, description=f"{name}: 检索资料（按查询返回结果）。"
        )

    return [tool_for(n) for n in names]


class ScriptedAgent(RecordingModel):
    """Replays a script: the turn's tool rounds, then its answer. The driver calls
    :meth:`begin` before each turn; every input is recorded with the question it belongs to
    (``expected``)."""

    script: list[Any]
    expected: list[str] = Field(default_factory=list)
    turn: int = 0
    round: int = 0

    def begin(self, turn: int) -> None:
        """Start turn ``turn``."""
        self.turn, self.round = turn, 0

    def reply(self, messages: list[BaseMessage]) -> AIMessage:
        turn = self.script[self.turn]
        self.expected.append(turn.human.text)
        n = len(self.calls)
        if self.round < len(turn.rounds):
            self.round += 1
            return AIMessage("", tool_calls=turn.rounds[self.round - 1], id=f"ai{n}")
        return AIMessage(turn.answer, id=f"ai{n}")


class ChineseSummarizer(RecordingModel):
    """A summarizer returning about ``tokens`` tokens of Chinese, every line tagged with
    :data:`SUMMARY_TAG` and the call number; records every input."""

    tokens: int = 560

    def reply(self, messages: list[BaseMessage]) -> AIMessage:
        n = len(self.calls)
        rng = random.Random(1_000 + n)
        lines, used = [], 0
        while used < self.tokens:
            line = f"{SUMMARY_TAG}{_number(n)}〕{_sentence(rng)}"
            lines.append(line)
            used += _tokens(line) + 1
        return AIMessage("\n".join(lines))


def has_summary(messages: Sequence[BaseMessage]) -> bool:
    """Whether a model input carries a summary of :class:`ChineseSummarizer` (or a shortened
    one of it)."""
    return any(re.search(re.escape(SUMMARY_TAG), m.text) for m in messages)
