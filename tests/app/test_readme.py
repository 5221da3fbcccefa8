"""The README works as written: its quickstarts run offline exactly as shown (no
``OPENAI_API_KEY``: the offline stand-in answers, the databases in a temporary directory), each
names the extras it needs, its two commands are the ones `.ci/run` runs on every supported
Python, and the pages speak of the software, the changelog of the version the CLI prints."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tiktoken_offline import install_offline_encodings

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
PYPROJECT = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
CI = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)
_start = README.index("\n## Quickstarts\n")
QUICKSTARTS = README[_start : README.index("\n## ", _start + 1)]
QUICKSTART_BLOCKS = re.findall(r"```python\n(.*?)```", QUICKSTARTS, re.S)


@pytest.fixture
def quickstart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Globals to run a README block in: offline (no API key), in a temporary directory."""
    install_offline_encodings()
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    return {}


def _block(starting: str) -> str:
    (block,) = [b for b in BLOCKS if b.lstrip().startswith(starting)]
    return block


def _section(heading: str) -> str:
    """The text of the quickstart under ``### heading...``, up to the next heading."""
    start = QUICKSTARTS.index(f"\n### {heading}")
    return QUICKSTARTS[start : QUICKSTARTS.find("\n### ", start + 1)]


AGENT, RWMH, COPY = (
    "from langchain.agents",
    "from langchain_core.prompts",
    "from langmem_sqlite import copy_database",
)


def test_every_quickstart_block_has_a_test() -> None:
    assert [b.split("\n", 1)[0] for b in QUICKSTART_BLOCKS] == [
        AGENT + " import create_agent",
        RWMH + " import ChatPromptTemplate, MessagesPlaceholder",
        COPY,
    ]


def test_agent_quickstart_runs_offline_as_written(
    quickstart: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    exec(_block(AGENT), quickstart)
    answer, facts = capsys.readouterr().out.splitlines()
    assert answer == "[offline] You live in Lyon (found in long-term facts)."
    assert facts == "['The user lives in Lyon.']"
    saver = quickstart["memory"].checkpointer
    for thread in ("t1", "t2"):
        assert saver.get_tuple({"configurable": {"thread_id": thread}})


def test_rwmh_quickstart_runs_offline_as_written(
    quickstart: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exec(_block(RWMH), quickstart)
    assert (
        capsys.readouterr().out == "[offline] Your name is Alice (found in the recent messages).\n"
    )
    from langmem_sqlite import ConversationStore

    stored = ConversationStore(str(tmp_path / "chat.db")).get_messages("c1", user_id="alice")
    assert [m.text for m in stored][::2] == ["hi, my name is Alice", "what is my name?"]


def test_copy_quickstart(quickstart: dict[str, Any], tmp_path: Path) -> None:
    from langchain_core.messages import HumanMessage

    from langmem_sqlite import ConversationStore

    ConversationStore(str(tmp_path / "chat.db")).add_messages("s", [HumanMessage("hi")])
    code = _block(COPY)
    exec(code.replace("postgresql://user@host/db", f"sqlite:///{tmp_path}/copy.db"), quickstart)
    report = quickstart["report"]
    assert report.verified and report.copied == 2 and report.present == 0


def test_the_langgraph_way_leads_and_rwmh_is_for_existing_chains() -> None:
    headings = re.findall(r"\n### (.*)", QUICKSTARTS)
    assert headings[0].startswith("A LangGraph agent")
    rwmh = _section("Chat history in an existing chain")
    assert "deprecated" in rwmh and "new code starts from" in rwmh


def test_install_commands_work_from_a_checkout() -> None:
    """Nothing is published under the package's name: every install is the checkout form, with
    extras that exist, and each quickstart that needs extras names them."""
    assert 'pip install "langmem-sqlite[' not in README
    optional = PYPROJECT.split("[project.optional-dependencies]\n", 1)[1].split("\n[", 1)[0]
    extras = set(re.findall(r"^([a-z-]+) = ", optional, re.M))
    named = re.findall(r'pip install "\.\[([a-z,-]+)\]"', README)
    assert named and {e for group in named for e in group.split(",")} <= extras
    for heading, needs in [
        ("A LangGraph agent", "agents,openai"),
        ("Chat history in an existing chain", "openai"),
        ("Moving to PostgreSQL", "postgres"),
    ]:
        assert f'pip install ".[{needs}]"' in _section(heading), heading


def test_the_two_commands_are_those_ci_runs() -> None:
    first_lines = README.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    assert first_lines[0].startswith("pip install . && langmem-sqlite chat --tour ")
    assert first_lines[1].startswith('pip install ".[test]" && pytest ')
    assert 'pip install -q "$OLDPWD" && langmem-sqlite chat --tour' in CI
    assert 'pip install -q ".[test]" && pytest' in CI


def test_ci_installs_on_the_oldest_and_newest_supported_python() -> None:
    """The classifiers span ``requires-python``, and CI installs and runs the tour and the
    SQLite tests on both ends of that span."""
    versions = sorted(
        re.findall(r'"Programming Language :: Python :: (3\.\d+)"', PYPROJECT),
        key=lambda v: int(v.split(".")[1]),
    )
    assert f'requires-python = ">={versions[0]}"' in PYPROJECT
    (pythons,) = re.findall(r'^PYTHONS="(.*)"', CI, re.M)
    assert pythons.split() == [versions[0], versions[-1]]


def test_the_changelog_speaks_of_the_version_the_cli_prints() -> None:
    script = shutil.which("langmem-sqlite", path=str(Path(sys.executable).parent))
    assert script is not None
    out = subprocess.run([script, "--version"], capture_output=True, text=True, timeout=60)
    version = out.stdout.split()[-1]
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    first = re.findall(r"^## (.*)", changelog, re.M)[0]
    assert first.split()[0] == version, first


def test_the_project_speaks_of_the_software() -> None:
    """No page tells how the package was developed (only what it does and measures)."""
    pages = [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "benchmarks" / "README.md"]
    pages += sorted((ROOT / "docs").rglob("*.md"))
    pattern = re.compile(
        r"[Ss]ession [0-9]+|this session|last session|previous session|\b[Rr]ound [0-9]+\b"
        r"|\b[Rr]un [0-9]+ of\b|sessions? ago|earlier design|✓ once|\bPASS\b"
    )
    for page in pages:
        found = pattern.findall(page.read_text(encoding="utf-8"))
        assert not found, (str(page.relative_to(ROOT)), found)


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
