"""The README's quickstarts run as written (ChatOpenAI replaced by the offline stand-in, the
databases in a temporary directory), and its two commands are the ones `.ci/run` runs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from tiktoken_offline import install_offline_encodings

from langmem_sqlite.chat import OfflineChatModel

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)


class _Model(OfflineChatModel):
    """``ChatOpenAI(model=...)`` as the quickstarts call it, answered offline."""

    def __init__(self, **_: Any) -> None:
        super().__init__()


@pytest.fixture
def quickstart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    import langchain_openai

    install_offline_encodings()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(langchain_openai, "ChatOpenAI", _Model)
    return {}


def _block(starting: str) -> str:
    (block,) = [b for b in BLOCKS if b.lstrip().startswith(starting)]
    return block


def test_rwmh_quickstart(quickstart: dict[str, Any], tmp_path: Path) -> None:
    exec(_block("from langchain_core.prompts"), quickstart)
    from langmem_sqlite import ConversationStore

    stored = ConversationStore(str(tmp_path / "chat.db")).get_messages("c1", user_id="alice")
    assert [m.text for m in stored][::2] == ["hi, I am Alice", "what is my name?"]


def test_agent_quickstart(quickstart: dict[str, Any]) -> None:
    exec(_block("from langchain.agents import create_agent"), quickstart)
    saver = quickstart["memory"].checkpointer
    for thread in ("t1", "t2"):
        assert saver.get_tuple({"configurable": {"thread_id": thread}})


def test_copy_quickstart(quickstart: dict[str, Any], tmp_path: Path) -> None:
    from langchain_core.messages import HumanMessage

    from langmem_sqlite import ConversationStore

    ConversationStore(str(tmp_path / "chat.db")).add_messages("s", [HumanMessage("hi")])
    code = _block("from langmem_sqlite import copy_database")
    exec(code.replace("postgresql://user@host/db", f"sqlite:///{tmp_path}/copy.db"), quickstart)
    report = quickstart["report"]
    assert report.verified and report.copied == 2 and report.present == 0


def test_the_two_commands_are_those_ci_runs() -> None:
    first_lines = README.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    assert first_lines[0].startswith("pip install . && langmem-sqlite chat --tour ")
    assert first_lines[1].startswith('pip install ".[test]" && pytest ')
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert 'pip install -q "$OLDPWD" && langmem-sqlite chat --tour' in ci
    assert 'pip install -q ".[test]" && pytest' in ci


def test_the_project_speaks_of_the_software() -> None:
    """No page tells how the package was developed (only what it does and measures)."""
    pages = [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "benchmarks" / "README.md"]
    pages += sorted((ROOT / "docs").rglob("*.md"))
    pattern = re.compile(r"\b(this session|session \d+|sessions \d+|previous session)", re.I)
    for page in pages:
        found = pattern.findall(page.read_text(encoding="utf-8"))
        assert not found, (page.name, found)


def test_checkpointer_dropin_block(quickstart: dict[str, Any], tmp_path: Path) -> None:
    """The checkpointer section's block runs (PostgreSQL replaced by a second SQLite file):
    every saver it builds checkpoints the graph, and ``:memory:`` savers share nothing."""
    import ast
    import asyncio

    from langgraph.graph import START, MessagesState, StateGraph

    builder = StateGraph(MessagesState)
    builder.add_node("bot", lambda s: {"messages": [("ai", "hello")]})
    builder.add_edge(START, "bot")
    config = {"configurable": {"thread_id": "t1"}}
    code = _block("from langmem_sqlite import SQLSaver")
    code = code.replace('"postgresql://user:pass@host/db"', f'"{tmp_path}/pg.db"')
    env = dict(quickstart, builder=builder, inputs={"messages": [("user", "hi")]}, config=config)
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    asyncio.run(eval(compile(code, "README", "exec", flags=flags), env))
    from langmem_sqlite import SQLSaver

    for path in ("pg.db", "chat.db"):
        with SQLSaver.from_conn_string(str(tmp_path / path)) as saver:
            state = saver.get_tuple(config)
            assert state is not None and len(state.checkpoint["channel_values"]["messages"]) >= 2
    assert SQLSaver(":memory:").get_tuple(config) is None
