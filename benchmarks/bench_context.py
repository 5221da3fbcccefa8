"""Context-window benchmark: langmem_sqlite's ContextPolicy against the anchors it replaces.

A scripted 200-turn agent conversation (English, Chinese, code, logs; parallel tool calls) is
replayed through real agents with recording fake models, at a budget of 4,000 exact gpt-4o
tokens including the system prompt:

* ``ContextPolicy`` as a ``pre_model_hook`` in ``create_react_agent`` and as ``ContextMiddleware``
  in ``create_agent``;
* langmem ``SummarizationNode`` (``max_tokens=4000``) as a ``pre_model_hook``;
* langchain ``SummarizationMiddleware`` (trigger 4,000 tokens, default keep of 20 messages);
* plain ``trim_messages`` (approximate 4,000 tokens, ``start_on="human"``) as a hook.

Every model and summarizer input is counted exactly (``ChatOpenAI(model="gpt-4o")`` formula).
Then the hook time at 10,000 messages with exact counting is compared with ``trim_messages``
using the ``ChatOpenAI`` counter.

Run: ``python benchmarks/bench_context.py`` (``--quick`` for a short run).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]

from tiktoken_offline import install_offline_encodings  # noqa: E402

install_offline_encodings()

from context_corpus import chinese, code, english, logs  # noqa: E402
from context_fakes import RecordingModel  # noqa: E402
from langchain_core.messages import (  # noqa: E402
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)
from langchain_core.tools import tool  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from pydantic import Field  # noqa: E402

from langmem_sqlite.context import (  # noqa: E402
    ContextAgentState,
    ContextMiddleware,
    ContextPolicy,
    check_structure,
    pre_model_hook,
)
from langmem_sqlite.counting import resolve_message_counter  # noqa: E402

warnings.filterwarnings("ignore")

BUDGET = 4_000
EXACT = resolve_message_counter("gpt-4o")
SYSTEM = (
    "You are a senior engineering assistant for a data platform team. Answer precisely, "
    "use the tools for facts you do not know, cite tool results, and answer in the user's "
    "language. Keep answers short unless code is requested."
)


# -- the script ------------------------------------------------------------------------------


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


class ReplayModel(RecordingModel):
    """Replays the scripted AI messages in order and records every input."""

    script: list[dict[str, Any]]
    expected: list[str] = Field(default_factory=list)
    cursor: int = 0
    pending_answer: bool = False

    def reply(self, messages: list[BaseMessage]) -> AIMessage:
        turn = self.script[self.cursor]
        self.expected.append(turn["human"].text)
        n = len(self.calls)
        if turn["calls"] and not self.pending_answer:
            self.pending_answer = True
            return AIMessage("", tool_calls=turn["calls"], id=f"ai{n}")
        self.pending_answer = False
        self.cursor += 1
        return AIMessage(turn["answer"], id=f"ai{n}")


class FixedSummarizer(RecordingModel):
    """Returns a summary of about 250 tokens and records every input."""

    def reply(self, messages: list[BaseMessage]) -> AIMessage:
        rng = random.Random(len(self.calls))
        return AIMessage(f"Summary {len(self.calls)}: " + english(rng)[:900])


def make_tool(script: list[dict[str, Any]]) -> Any:
    results = {q: r for turn in script for q, r in turn["results"].items()}

    @tool
    def lookup(query: str) -> str:
        """Look up facts in the team's data catalog."""
        return results[query]

    return lookup


# -- the configurations ----------------------------------------------------------------------


Run = tuple[ReplayModel, FixedSummarizer]


def _react(script: list[dict[str, Any]], summ: FixedSummarizer, hook: Any, **kw: Any) -> Run:
    from langgraph.prebuilt import create_react_agent

    model = ReplayModel(script=script)
    agent = create_react_agent(
        model, [make_tool(script)], pre_model_hook=hook, checkpointer=InMemorySaver(), **kw
    )
    _drive(agent, script)
    return model, summ


def _agent(script: list[dict[str, Any]], summ: FixedSummarizer, middleware: Any) -> Run:
    from langchain.agents import create_agent

    model = ReplayModel(script=script)
    agent = create_agent(
        model,
        [make_tool(script)],
        system_prompt=SYSTEM,
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    _drive(agent, script)
    return model, summ


def run_ours_react(script: list[dict[str, Any]]) -> Run:
    summ = FixedSummarizer()
    policy = ContextPolicy(max_tokens=BUDGET, model="gpt-4o", system_prompt=SYSTEM, summarizer=summ)
    return _react(script, summ, pre_model_hook(policy), state_schema=ContextAgentState)


def run_ours_middleware(script: list[dict[str, Any]]) -> Run:
    summ = FixedSummarizer()
    policy = ContextPolicy(max_tokens=BUDGET, model="gpt-4o", summarizer=summ)
    return _agent(script, summ, ContextMiddleware(policy))


def run_langmem(script: list[dict[str, Any]]) -> Run:
    from langgraph.prebuilt.chat_agent_executor import AgentState
    from langmem.short_term import SummarizationNode

    class State(AgentState):  # type: ignore[misc]
        context: dict[str, Any]

    summ = FixedSummarizer()
    node = SummarizationNode(
        model=summ, max_tokens=BUDGET, output_messages_key="llm_input_messages"
    )
    return _react(script, summ, node, prompt=SYSTEM, state_schema=State)


def run_middleware(script: list[dict[str, Any]]) -> Run:
    from langchain.agents.middleware import SummarizationMiddleware

    summ = FixedSummarizer()
    return _agent(script, summ, SummarizationMiddleware(model=summ, trigger=("tokens", BUDGET)))


def run_trim(script: list[dict[str, Any]]) -> Run:
    def hook(state: dict[str, Any]) -> dict[str, Any]:
        kept = trim_messages(
            state["messages"],
            max_tokens=BUDGET,
            token_counter="approximate",
            strategy="last",
            start_on="human",
            include_system=True,
        )
        return {"llm_input_messages": kept}

    return _react(script, FixedSummarizer(), hook, prompt=SYSTEM)


def _drive(agent: Any, script: list[dict[str, Any]]) -> None:
    config = {"configurable": {"thread_id": "bench"}, "recursion_limit": 50}
    for turn in script:
        agent.invoke({"messages": [turn["human"]]}, config)


def history_size(script: list[dict[str, Any]]) -> tuple[int, int]:
    """Messages and exact tokens of the whole scripted history."""
    msgs: list[BaseMessage] = []
    for turn in script:
        msgs.append(turn["human"])
        if turn["calls"]:
            msgs.append(AIMessage("", tool_calls=turn["calls"]))
            msgs += [ToolMessage(r, tool_call_id="x") for r in turn["results"].values()]
        msgs.append(AIMessage(turn["answer"]))
    return len(msgs), sum(EXACT(m) for m in msgs)


def measure(model: ReplayModel, summ: FixedSummarizer) -> dict[str, Any]:
    sizes = [EXACT.count(call) for call in model.calls]
    violations = 0
    kinds: dict[str, int] = {}
    for call, question in zip(model.calls, model.expected, strict=True):
        problems = check_structure(call, require_human=True)
        if not any(m.type == "human" and m.text == question for m in call):
            problems.append("latest human message missing")
        violations += bool(problems)
        for p in problems:
            kind = p.split(" at index")[0].split(" (")[0].split(":")[0]
            kinds[kind] = kinds.get(kind, 0) + 1
    summ_tokens = sum(EXACT.count(call) for call in summ.calls)
    return {
        "model_calls": len(model.calls),
        "max_input": max(sizes),
        "over_budget": sum(s > BUDGET for s in sizes),
        "violations": violations,
        "kinds": kinds,
        "summ_calls": len(summ.calls),
        "summ_input": summ_tokens,
        "main_input": sum(sizes),
        "total": sum(sizes) + summ_tokens,
    }


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
    parser.add_argument("--quick", action="store_true", help="40 turns, 2,000 messages")
    args = parser.parse_args()
    turns, n_hist, anchor_runs = (40, 2_000, 1) if args.quick else (200, 10_000, 3)
    script = make_script(turns)
    n_msgs, n_tokens = history_size(script)
    print(
        f"{turns}-turn agent conversation ({n_msgs} messages, {n_tokens} exact tokens), "
        f"budget {BUDGET} exact gpt-4o tokens incl. system"
    )
    configs = [
        ("ours: ContextPolicy hook (create_react_agent)", run_ours_react),
        ("ours: ContextMiddleware (create_agent)", run_ours_middleware),
        ("langmem SummarizationNode", run_langmem),
        ("langchain SummarizationMiddleware", run_middleware),
        ("trim_messages approx, start_on=human", run_trim),
    ]
    rows = {}
    header = (
        f"{'configuration':46} {'calls':>5} {'max in':>6} {'over':>4} {'viol':>4} "
        f"{'summ':>4} {'summ in':>8} {'main in':>9} {'total':>9}"
    )
    print(header)
    print("-" * len(header))
    for name, fn in configs:
        r = measure(*fn(script))
        rows[name] = r
        print(
            f"{name:46} {r['model_calls']:5} {r['max_input']:6} {r['over_budget']:4} "
            f"{r['violations']:4} {r['summ_calls']:4} {r['summ_input']:8} "
            f"{r['main_input']:9} {r['total']:9}"
        )
        if r["kinds"]:
            print(f"{'':6}violations by kind (calls): {r['kinds']}")
    ours = rows[configs[0][0]]
    trim = rows[configs[-1][0]]
    print()
    print(f"total tokens, ours / plain trim_messages: {ours['total'] / trim['total']:.2f}")
    for name in ("langmem SummarizationNode", "langchain SummarizationMiddleware"):
        a = rows[name]
        print(
            f"vs {name}: max input {ours['max_input']} vs {a['max_input']}, summarizer "
            f"input {ours['summ_input']} vs {a['summ_input']} "
            f"({ours['summ_input'] / max(1, a['summ_input']):.2f}x), total "
            f"{ours['total'] / a['total']:.2f}x"
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
    checks = [
        ("largest model input <= budget", ours["max_input"] <= BUDGET),
        ("0 structural violations", ours["violations"] == 0),
        ("summarizer calls <= 40", ours["summ_calls"] <= 40),
        ("summarizer input tokens <= 80k", ours["summ_input"] <= 80_000),
        ("total tokens <= plain trim_messages", ours["total"] <= trim["total"]),
        ("hook time <= 0.01x trim_messages(ChatOpenAI)", ratio <= 0.01),
        ("warm <= 5 ms, cold <= 50 ms", h["ours_warm_p50_ms"] <= 5 and h["ours_cold_ms"] <= 50),
    ]
    for label, ok in checks:
        print(f"  [{'ok' if ok else 'MISSED'}] {label}")


if __name__ == "__main__":
    main()
