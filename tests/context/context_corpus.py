"""A realistic mixed-language conversation corpus for counting, trimming and benchmark tests.

Deterministic for a seed: English prose (standard-library docstrings), Chinese, mixed
English/Chinese, real Python code, pasted logs, and tool calls (parallel ones included) with JSON
results. Every message has an id.
"""

from __future__ import annotations

import inspect
import json
import random
from dataclasses import dataclass

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

__all__ = ["CATEGORIES", "Sample", "chinese", "code", "corpus", "english", "logs"]

_CHINESE = [
    "请帮我总结一下这份季度报告的要点，特别是关于收入增长和成本控制的部分。",
    "我们的数据库在高并发情况下出现了死锁，应该如何排查这个问题？",
    "这段代码的时间复杂度是多少？能不能优化到线性时间？",
    "明天上午十点在三楼会议室开会，讨论新产品的发布计划，请准时参加。",
    "机器学习模型在训练集上表现很好，但在测试集上准确率下降了百分之二十，可能是过拟合。",
    "北京今天的天气晴转多云，最高气温二十六度，最低气温十五度，空气质量良好。",
    "根据用户反馈，新版本的界面更加简洁，但是部分老用户觉得找不到常用功能。",
    "请把这篇文章翻译成英文，注意保持原文的语气和专业术语的准确性。",
    "我们需要在下周五之前完成系统迁移，包括数据备份、服务切换和回滚方案。",
    "长江是中国最长的河流，全长约六千三百公里，流经十一个省级行政区。",
    "这个接口的响应时间从两百毫秒增加到了两秒，需要检查一下缓存是否失效。",
    "他们决定把办公室搬到上海浦东新区，那里交通方便，周边配套设施也很完善。",
]
_MIXED = [
    "请用 Python 写一个 function，读取 CSV 文件并计算每列的 average。",
    "我们的 API gateway 在 peak hours 的 latency 太高了，能用 Redis 做 cache 吗？",
    "Deploy 到 production 之前，记得先跑一遍 integration tests 和 lint。",
    "这个 bug 只在 Safari 上出现，Chrome 和 Firefox 都正常，可能是 CSS flexbox 的问题。",
]
_TOOLS = ["search_web", "get_weather", "query_database", "read_file", "run_python"]


def _docstrings() -> list[str]:
    import collections
    import json as _json
    import pathlib
    import textwrap

    out = []
    for mod in (collections, _json, pathlib, textwrap, random, inspect):
        for _, obj in inspect.getmembers(mod):
            doc = inspect.getdoc(obj)
            if doc and 200 < len(doc) < 3000 and doc.isascii():
                out.append(doc)
    return sorted(set(out))


def _sources() -> list[str]:
    import textwrap

    out = []
    for mod in (textwrap, json.decoder, json.encoder):
        for _, obj in inspect.getmembers(mod, inspect.isfunction):
            try:
                src = inspect.getsource(obj)
            except (OSError, TypeError):
                continue
            if 200 < len(src) < 4000:
                out.append(src)
    return sorted(set(out))


def english(rng: random.Random) -> str:
    """An English paragraph (a standard-library docstring)."""
    return rng.choice(_docstrings())


def chinese(rng: random.Random) -> str:
    """One to three Chinese sentences."""
    return "".join(rng.sample(_CHINESE, rng.randint(1, 3)))


def code(rng: random.Random) -> str:
    """A real Python function's source, sometimes in a Markdown fence."""
    src = rng.choice(_sources())
    return f"```python\n{src}```" if rng.random() < 0.5 else src


def logs(rng: random.Random) -> str:
    """A few lines of a pasted service log."""
    lines = []
    for _ in range(rng.randint(4, 12)):
        lines.append(
            f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:"
            f"{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}.{rng.randint(0, 999):03d}Z "
            f"{rng.choice(['INFO', 'WARN', 'ERROR', 'DEBUG'])} [worker-{rng.randint(1, 16)}] "
            f"/var/lib/app/{rng.choice(['db', 'cache', 'queue'])}/shard_{rng.randint(0, 99)}.dat "
            f"request_id={rng.getrandbits(64):016x} latency_ms={rng.randint(1, 5000)} "
            f"status={rng.choice([200, 201, 404, 500, 503])}"
        )
    return "\n".join(lines)


def _tool_args(rng: random.Random, name: str) -> dict[str, object]:
    if name == "get_weather":
        return {"city": rng.choice(["Paris", "北京", "São Paulo", "Tokyo"]), "unit": "celsius"}
    if name == "query_database":
        return {
            "sql": "SELECT id, name FROM users WHERE created_at > ? LIMIT 50",
            "params": [f"2024-0{rng.randint(1, 9)}-01"],
        }
    if name == "read_file":
        return {"path": f"/srv/app/src/module_{rng.randint(1, 40)}.py"}
    if name == "run_python":
        return {"code": "import math\nprint(sum(math.sqrt(i) for i in range(100)))"}
    return {
        "query": rng.choice(["langgraph checkpoint", "上海 天气", "sqlite wal mode"]),
        "k": rng.randint(1, 10),
    }


def _tool_result(rng: random.Random, name: str) -> str:
    if name == "get_weather":
        return json.dumps(
            {"temp": rng.randint(-5, 35), "sky": rng.choice(["sunny", "多云"])}, ensure_ascii=False
        )
    if name == "read_file":
        return code(rng)
    rows = [
        {
            "id": rng.randint(1, 10_000),
            "title": rng.choice(_MIXED)[:30],
            "score": round(rng.random(), 3),
        }
        for _ in range(rng.randint(1, 6))
    ]
    return json.dumps({"results": rows}, ensure_ascii=False)


@dataclass
class Sample:
    """One message and its content kind."""

    kind: str
    message: BaseMessage


CATEGORIES = ("english", "chinese", "mixed", "code", "logs", "tool")


def corpus(seed: int = 7, turns: int = 120) -> list[Sample]:
    """A conversation of ``turns`` turns; each message labelled with its content kind."""
    rng = random.Random(seed)
    out: list[Sample] = []
    n = 0

    def nid() -> str:
        nonlocal n
        n += 1
        return f"m{seed}-{n}"

    for _ in range(turns):
        kind = rng.choice(["english", "chinese", "mixed", "code", "logs", "tool"])
        if kind == "tool":
            out.append(Sample("mixed", HumanMessage(rng.choice(_MIXED), id=nid())))
            calls = []
            for name in rng.sample(_TOOLS, rng.randint(1, 3)):
                calls.append(
                    {
                        "name": name,
                        "args": _tool_args(rng, name),
                        "id": f"call_{rng.getrandbits(48):012x}",
                        "type": "tool_call",
                    }
                )
            out.append(Sample("tool", AIMessage("", tool_calls=calls, id=nid())))
            for c in calls:
                out.append(
                    Sample(
                        "tool",
                        ToolMessage(_tool_result(rng, c["name"]), tool_call_id=c["id"], id=nid()),
                    )
                )
            out.append(Sample("mixed", AIMessage(rng.choice(_MIXED), id=nid())))
            continue
        text = {
            "english": english,
            "chinese": chinese,
            "code": code,
            "logs": logs,
            "mixed": lambda r: r.choice(_MIXED),
        }[kind](rng)
        name = "alice" if rng.random() < 0.2 else None
        out.append(Sample(kind, HumanMessage(text, id=nid(), name=name)))
        reply = {
            "english": english,
            "chinese": chinese,
            "code": code,
            "logs": english,
            "mixed": lambda r: r.choice(_MIXED),
        }[kind](rng)
        out.append(
            Sample("logs" if kind == "logs" else kind, AIMessage(reply, id=nid()))
            if kind != "logs"
            else Sample("english", AIMessage(reply, id=nid()))
        )
    return out
