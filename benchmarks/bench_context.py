"""Context-window benchmark: langmem_sqlite's ContextPolicy against the anchors it replaces.

Two scripted agent conversations, replayed through real agents with recording fake models:

* the **200-turn** conversation (English, Chinese, code, logs; 40 rounds of parallel tool
  calls), budget 4,000 exact gpt-4o tokens including the system prompt;
* the **hard** one (``hard_conversation.py``): Chinese only, questions of 2,500-3,800 tokens,
  two rounds of 3-5 parallel tool results of 3,000-8,000 tokens per turn, and one question
  larger than the budget; budget 4,500 tokens (every other turn fits).

Contenders: ``ContextPolicy`` through its four adapters (``pre_model_hook`` in
``create_react_agent``, ``ContextMiddleware`` in ``create_agent``, ``context_node`` in a
``StateGraph``, ``context_step`` in ``RunnableWithMessageHistory``); langmem
``SummarizationNode`` (``max_tokens`` = budget) as a ``pre_model_hook``; langchain
``SummarizationMiddleware`` (trigger = budget, default keep of 20 messages); plain
``trim_messages`` (approximate, budget, ``start_on="human"``) as a hook.

Every model and summarizer input is counted exactly (``ChatOpenAI(model="gpt-4o")`` formula)
and checked for violations: orphan tool result, tool call without result, more than one system
message, system message not first, latest question missing, summary missing after history
was dropped. A turn that raises is *refused*; it *fits* when the system prompt and the
latest question (with the turn's tool results cut to their markers) fit the budget. Then the
hook time at 10,000 messages with exact counting is compared with ``trim_messages`` using the
``ChatOpenAI`` counter.

Run: ``python benchmarks/bench_context.py`` (``--quick`` for a short run).
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import re
import statistics
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "benchmarks"), str(ROOT)]

from tiktoken_offline import install_offline_encodings  # noqa: E402

install_offline_encodings()

from context_corpus import chinese, code, english, logs  # noqa: E402
from context_drivers import ADAPTERS, make_driver  # noqa: E402
from context_fakes import RecordingModel  # noqa: E402
from context_strategies import VIOLATION_KINDS, violations  # noqa: E402
from hard_conversation import (  # noqa: E402
    HARD_BUDGET,
    SUMMARY_TAG,
    SYSTEM_ZH,
    ChineseSummarizer,
    ScriptedAgent,
    Turn,
    hard_conversation,
    make_tools,
)
from langchain_core.messages import (  # noqa: E402
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402

from langmem_sqlite.context import TRUNCATION_MARKER, ContextPolicy  # noqa: E402
from langmem_sqlite.context.summary import SUMMARY_SHORTENED_MARKER  # noqa: E402
from langmem_sqlite.messages.counting import resolve_message_counter  # noqa: E402

warnings.filterwarnings("ignore")
logging.getLogger("langgraph").setLevel(logging.ERROR)  # langmem's RunningSummary warnings

BUDGET = 4_000
EXACT = resolve_message_counter("gpt-4o")
SYSTEM = (
    "You are a senior engineering assistant for a data platform team. Answer precisely, "
    "use the tools for facts you do not know, cite tool results, and answer in the user's "
    "language. Keep answers short unless code is requested."
)


# -- the 200-turn script ---------------------------------------------------------------------


def make_script(turns: int, seed: int = 7) -> list[dict[str, Any]]:
    """Per turn: the human message, optional parallel tool calls with results, the answer."""
    rng = random.Random(seed)
    script = []
    for t in range(turns):
        kind = rng.choice(["english", "chinese", "code", "logs", "english", "chinese"])
        text = {"english": english, "chinese": chinese, "code": code, "logs": logs}[kind](rng)
        text = text[:1400] if kind == "code" else text[:700]
        human = HumanMessage(f"[turn {t}] {text}", id=f"h{t}")
        calls, results = [], {}
        if t % 5 == 2:  # 40 tool round trips in 200 turns, some with parallel calls
            for i in range(rng.choice([1, 1, 2, 3])):
                q = f"t{t}c{i} " + rng.choice(["orders schema", "北京 天气", "error rate"])
                calls.append({"name": "lookup", "args": {"query": q}, "id": f"call_{t}_{i}"})
                rows = [
                    {"id": rng.randint(1, 99_999), "name": chinese(rng)[:20], "v": rng.random()}
                    for _ in range(rng.randint(2, 6))
                ]
                results[q] = json.dumps({"query": q, "rows": rows}, ensure_ascii=False)
        answer_kind = rng.choice(["english", "chinese", "code", "short"])
        answer = {
            "english": lambda r: english(r)[:600],
            "chinese": chinese,
            "code": lambda r: code(r)[:1400],
            "short": lambda r: "Done: " + chinese(r)[:40],
        }[answer_kind](rng)
        script.append({"human": human, "calls": calls, "results": results, "answer": answer})
    return script


def as_turns(script: list[dict[str, Any]]) -> list[Turn]:
    """The script as :class:`Turn` objects (one tool round where there are calls)."""
    return [
        Turn(t["human"], [t["calls"]] if t["calls"] else [], dict(t["results"]), t["answer"])
        for t in script
    ]


class FixedSummarizer(RecordingModel):
    """Returns a summary of about 250 tokens and records every input."""

    def reply(self, messages: list[BaseMessage]) -> AIMessage:
        rng = random.Random(len(self.calls))
        return AIMessage(f"Summary {len(self.calls)}: " + english(rng)[:900])


# -- one conversation, one contender ----------------------------------------------------------


@dataclass
class Conversation:
    """A script, its budget, system prompt and summarizer."""

    name: str
    turns: list[Turn]
    budget: int
    system: str
    summarizer: Callable[[], RecordingModel]


@dataclass
class Run:
    """What one contender did on one conversation."""

    model: ScriptedAgent
    summarizer: RecordingModel
    refused: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _drive(conv: Conversation, turn: Callable[[Turn, int], None], run: Run) -> Run:
    for t, step in enumerate(conv.turns):
        try:
            turn(step, t)
        except Exception as e:  # a refused turn (ours: ContextBudgetError), or an anchor's crash
            run.refused.append(t)
            run.errors.append(f"turn {t}: {type(e).__name__}: {str(e)[:120]}")
    return run


def run_ours(kind: str) -> Callable[[Conversation], Run]:
    def run(conv: Conversation) -> Run:
        model, summ = ScriptedAgent(script=conv.turns), conv.summarizer()
        policy = ContextPolicy(
            max_tokens=conv.budget, model="gpt-4o", system_prompt=conv.system, summarizer=summ
        )
        url = f"sqlite:///{tempfile.mkdtemp(prefix='bench-ctx-')}/step.db"
        driver = make_driver(kind, policy, model, make_tools(conv.turns), url=url)
        return _drive(conv, lambda step, t: driver.turn(step.human, t), Run(model, summ))

    return run


def _react(conv: Conversation, summ: RecordingModel, hook: Any, **kw: Any) -> Run:
    from langgraph.prebuilt import create_react_agent

    model = ScriptedAgent(script=conv.turns)
    agent = create_react_agent(
        model, make_tools(conv.turns), pre_model_hook=hook, checkpointer=InMemorySaver(), **kw
    )
    return _drive(conv, _invoker(agent, model), Run(model, summ))


def _invoker(agent: Any, model: ScriptedAgent) -> Callable[[Turn, int], None]:
    config = {"configurable": {"thread_id": "bench"}, "recursion_limit": 100}

    def turn(step: Turn, t: int) -> None:
        model.begin(t)
        agent.invoke({"messages": [step.human]}, config)

    return turn


def run_langmem(conv: Conversation) -> Run:
    from langgraph.prebuilt.chat_agent_executor import AgentState
    from langmem.short_term import SummarizationNode

    class State(AgentState):  # type: ignore[misc]
        context: dict[str, Any]

    summ = conv.summarizer()
    node = SummarizationNode(
        model=summ, max_tokens=conv.budget, output_messages_key="llm_input_messages"
    )
    return _react(conv, summ, node, prompt=conv.system, state_schema=State)


def run_middleware(conv: Conversation) -> Run:
    from langchain.agents import create_agent
    from langchain.agents.middleware import SummarizationMiddleware

    summ = conv.summarizer()
    model = ScriptedAgent(script=conv.turns)
    agent = create_agent(
        model,
        make_tools(conv.turns),
        system_prompt=conv.system,
        middleware=[SummarizationMiddleware(model=summ, trigger=("tokens", conv.budget))],
        checkpointer=InMemorySaver(),
    )
    return _drive(conv, _invoker(agent, model), Run(model, summ))


def run_trim(conv: Conversation) -> Run:
    def hook(state: dict[str, Any]) -> dict[str, Any]:
        kept = trim_messages(
            state["messages"],
            max_tokens=conv.budget,
            token_counter="approximate",
            strategy="last",
            start_on="human",
            include_system=True,
        )
        return {"llm_input_messages": kept}

    return _react(conv, conv.summarizer(), hook, prompt=conv.system)


CONTENDERS: list[tuple[str, Callable[[Conversation], Run]]] = [
    *[(f"ours: {kind}", run_ours(kind)) for kind in ADAPTERS],
    ("langmem SummarizationNode", run_langmem),
    ("langchain SummarizationMiddleware", run_middleware),
    ("trim_messages approx, start_on=human", run_trim),
]


# -- measuring --------------------------------------------------------------------------------


_SUMMARY = re.compile(rf"<conversation_summary>|Summary \d+: |{re.escape(SUMMARY_TAG)}")


def summary_seen(call: list[BaseMessage]) -> bool:
    """Whether a model input carries a summary (ours, or any anchor's of the fake
    summarizers)."""
    return any(_SUMMARY.search(m.text) for m in call)


def turn_fits(conv: Conversation, t: int) -> bool:
    """Point 1's rule for the turn's largest call: system prompt, question, the tool calls
    and the results cut to their markers."""
    turn = conv.turns[t]
    out: list[BaseMessage] = [SystemMessage(conv.system), turn.human]
    for r, batch in enumerate(turn.rounds):
        out.append(AIMessage("", tool_calls=batch, id=f"fit{r}"))
        for c in batch:
            n = len(turn.results[c["args"]["query"]])
            out.append(
                ToolMessage(TRUNCATION_MARKER.format(removed=n, total=n), tool_call_id=c["id"])
            )
    return EXACT.count(out) <= conv.budget


def measure(conv: Conversation, run: Run) -> dict[str, Any]:
    calls, summ = run.model.calls, run.summarizer.calls
    sizes = [EXACT.count(call) for call in calls]
    kinds: Counter[str] = Counter()
    bad = 0
    first = conv.turns[0].human.text
    for call, question in zip(calls, run.model.expected, strict=True):
        found = violations(call, question, first_question=first, summary_seen=summary_seen(call))
        bad += bool(found)
        kinds.update(found)
    summ_tokens = sum(EXACT.count(call) for call in summ)
    return {
        "summary_cut": sum(SUMMARY_SHORTENED_MARKER in m.text for c in calls for m in c),
        "results_cut": sum(any("removed to fit" in m.text for m in c) for c in calls),
        "model_calls": len(calls),
        "max_input": max(sizes),
        "over_budget": sum(s > conv.budget for s in sizes),
        "violations": bad,
        "kinds": dict(kinds),
        "refused": len(run.refused),
        "refused_fit": sum(turn_fits(conv, t) for t in run.refused),
        "errors": run.errors,
        "summ_calls": len(summ),
        "summ_input": summ_tokens,
        "main_input": sum(sizes),
        "total": sum(sizes) + summ_tokens,
    }


def history_size(turns: list[Turn]) -> tuple[int, int]:
    """Messages and exact tokens of a whole scripted history."""
    msgs: list[BaseMessage] = []
    for turn in turns:
        msgs.append(turn.human)
        for batch in turn.rounds:
            msgs.append(AIMessage("", tool_calls=batch))
            msgs += [ToolMessage(turn.results[c["args"]["query"]], tool_call_id="x") for c in batch]
        msgs.append(AIMessage(turn.answer))
    return len(msgs), sum(EXACT.uncached(m) for m in msgs)


def report(conv: Conversation) -> dict[str, dict[str, Any]]:
    n_msgs, n_tokens = history_size(conv.turns)
    print(
        f"\n{conv.name}: {len(conv.turns)} turns ({n_msgs} messages, {n_tokens:,} exact tokens), "
        f"budget {conv.budget:,} exact gpt-4o tokens incl. system"
    )
    header = (
        f"{'contender':38} {'calls':>5} {'max in':>7} {'over':>4} {'viol':>4} {'refused':>7} "
        f"{'fit':>3} {'summ':>4} {'summ in':>9} {'total':>10}"
    )
    print(header)
    print("-" * len(header))
    rows = {}
    for name, fn in CONTENDERS:
        r = measure(conv, fn(conv))
        rows[name] = r
        print(
            f"{name:38} {r['model_calls']:5} {r['max_input']:7,} {r['over_budget']:4} "
            f"{r['violations']:4} {r['refused']:7} {r['refused_fit']:3} {r['summ_calls']:4} "
            f"{r['summ_input']:9,} {r['total']:10,}"
        )
        if r["kinds"]:
            kinds = ", ".join(f"{k} {r['kinds'][k]}" for k in VIOLATION_KINDS if k in r["kinds"])
            print(f"{'':6}violations by kind (calls): {kinds}")
        if name.startswith("ours"):
            print(
                f"{'':6}calls with the summary shortened for the call {r['summary_cut']}, "
                f"with tool results cut to fit {r['results_cut']}"
            )
        for err in r["errors"][:2]:
            print(f"{'':6}refused {err}")
    return rows


# -- hook time at 10,000 messages ------------------------------------------------------------


def long_history(n: int) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    seed = 0
    while len(out) < n:
        seed += 1
        for turn in make_script(50, seed=seed):
            h = turn["human"].model_copy(update={"id": f"s{seed}-{turn['human'].id}"})
            out.append(h)
            if turn["calls"]:
                calls = [dict(c, id=f"s{seed}-{c['id']}") for c in turn["calls"]]
                out.append(AIMessage("", tool_calls=calls, id=f"s{seed}-a-{h.id}"))
                for c in calls:
                    q = c["args"]["query"]
                    out.append(
                        ToolMessage(turn["results"][q], tool_call_id=c["id"], id=f"tm-{c['id']}")
                    )
            out.append(AIMessage(turn["answer"], id=f"s{seed}-b-{h.id}"))
    out = out[:n]
    while out[-1].type != "human":
        out.pop()
    return out


def time_hooks(n: int, anchor_runs: int) -> dict[str, float]:
    from langchain_openai import ChatOpenAI

    history = long_history(n)
    state = [SystemMessage(SYSTEM), *history]
    res: dict[str, float] = {"messages": len(history)}
    EXACT(HumanMessage("load the encoding"))  # cold = empty count cache, encoding loaded
    EXACT.clear_cache()
    policy = ContextPolicy(max_tokens=BUDGET, model="gpt-4o", system_prompt=SYSTEM)
    t = time.perf_counter()
    policy.prepare(history)
    res["ours_cold_ms"] = (time.perf_counter() - t) * 1000
    warm = []
    for _ in range(50):
        t = time.perf_counter()
        out = policy.prepare(history)
        warm.append((time.perf_counter() - t) * 1000)
    res["ours_warm_p50_ms"] = statistics.median(warm)
    res["ours_kept"] = out.info["kept"]
    # steady state of a summarizing policy (record near the end, nothing triggers)
    summ_policy = ContextPolicy(
        max_tokens=BUDGET, model="gpt-4o", system_prompt=SYSTEM, summarizer=FixedSummarizer()
    )
    upto = len(history) - 12
    while history[upto + 1].type != "human":
        upto -= 1
    record = {
        "summary": "s " * 200,
        "upto_id": history[upto].id,
        "upto_index": upto,
        "summary_tokens": 200,
    }
    summ_times = []
    for _ in range(50):
        t = time.perf_counter()
        summ_policy.prepare(history, record)
        summ_times.append((time.perf_counter() - t) * 1000)
    res["ours_summary_warm_p50_ms"] = statistics.median(summ_times)
    ref = ChatOpenAI(model="gpt-4o", api_key="sk-none")
    times = []
    for _ in range(anchor_runs):
        t = time.perf_counter()
        trim_messages(
            state,
            max_tokens=BUDGET,
            token_counter=ref,
            strategy="last",
            start_on="human",
            include_system=True,
        )
        times.append((time.perf_counter() - t) * 1000)
    res["trim_chatopenai_ms"] = statistics.median(times)
    t = time.perf_counter()
    trim_messages(
        state,
        max_tokens=BUDGET,
        token_counter="approximate",
        strategy="last",
        start_on="human",
        include_system=True,
    )
    res["trim_approx_ms"] = (time.perf_counter() - t) * 1000
    return res


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="40 + 6 turns, 2,000 messages")
    args = parser.parse_args()
    turns, hard_turns, n_hist, anchor_runs = (
        (40, 6, 2_000, 1) if args.quick else (200, 24, 10_000, 3)
    )
    conversations = [
        Conversation(
            f"{turns}-turn agent conversation",
            as_turns(make_script(turns)),
            BUDGET,
            SYSTEM,
            FixedSummarizer,
        ),
        Conversation(
            "hard conversation (Chinese, big parallel tool results, long questions)",
            hard_conversation(hard_turns),
            HARD_BUDGET,
            SYSTEM_ZH,
            ChineseSummarizer,
        ),
    ]
    results = [report(conv) for conv in conversations]
    ours = [k for k in results[0] if k.startswith("ours")]
    plain, hard = results
    print()
    o = plain[ours[0]]
    trim = plain["trim_messages approx, start_on=human"]
    print(f"200-turn total tokens, ours / plain trim_messages: {o['total'] / trim['total']:.2f}")
    for name in ("langmem SummarizationNode", "langchain SummarizationMiddleware"):
        a = plain[name]
        print(
            f"vs {name}: max input {o['max_input']} vs {a['max_input']}, summarizer input "
            f"{o['summ_input']} vs {a['summ_input']} ({o['summ_input'] / max(1, a['summ_input']):.2f}x), "
            f"total {o['total'] / a['total']:.2f}x"
        )
    print()
    h = time_hooks(n_hist, anchor_runs)
    print(
        f"hook time at {int(h['messages'])} messages, exact gpt-4o counting "
        f"(kept {int(h['ours_kept'])} messages):"
    )
    print(f"  ours cold          {h['ours_cold_ms']:9.2f} ms")
    print(f"  ours warm p50      {h['ours_warm_p50_ms']:9.2f} ms")
    print(f"  ours summary, warm {h['ours_summary_warm_p50_ms']:9.2f} ms")
    print(f"  trim_messages ChatOpenAI counter {h['trim_chatopenai_ms']:9.1f} ms")
    print(f"  trim_messages approximate        {h['trim_approx_ms']:9.1f} ms")
    ratio = h["ours_warm_p50_ms"] / h["trim_chatopenai_ms"]
    print(
        f"  ratio ours warm / trim_messages(ChatOpenAI): {ratio:.5f}; cold: "
        f"{h['ours_cold_ms'] / h['trim_chatopenai_ms']:.5f}"
    )
    print()
    every = [r for rows in results for k, r in rows.items() if k.startswith("ours")]
    checks = [
        (
            "ours, every adapter, both conversations: 0 calls over budget",
            all(r["over_budget"] == 0 for r in every),
        ),
        ("ours: 0 structural violations", all(r["violations"] == 0 for r in every)),
        ("ours: 0 refused turns that fit", all(r["refused_fit"] == 0 for r in every)),
        (
            "ours: the oversized question refused (1 turn, hard conversation)",
            all(hard[k]["refused"] == 1 for k in ours),
        ),
        ("200-turn: summarizer calls <= 40", all(plain[k]["summ_calls"] <= 40 for k in ours)),
        (
            "200-turn: summarizer input tokens <= 80k",
            all(plain[k]["summ_input"] <= 80_000 for k in ours),
        ),
        (
            "200-turn: total tokens <= plain trim_messages",
            all(plain[k]["total"] <= trim["total"] for k in ours),
        ),
        ("hook time <= 0.01x trim_messages(ChatOpenAI)", ratio <= 0.01),
        ("warm <= 5 ms, cold <= 50 ms", h["ours_warm_p50_ms"] <= 5 and h["ours_cold_ms"] <= 50),
    ]
    for label, ok in checks:
        print(f"  [{'ok' if ok else 'MISSED'}] {label}")


if __name__ == "__main__":
    main()
