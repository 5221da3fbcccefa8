"""`langmem-sqlite chat`: the terminal chat, its line editor and its input history."""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import click

from .base import cli, count_range, db_option, prefix_option, url
from .output import out


def history_file(database_url: Any) -> Path:
    """The input-history file of the chat on `database_url` (one per database):
    `$XDG_STATE_HOME/langmem-sqlite/history/<hash of the URL, without password>`."""
    from sqlalchemy.engine import make_url

    name = make_url(str(database_url)).render_as_string(hide_password=True)
    digest = hashlib.sha256(name.encode()).hexdigest()[:24]
    state = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(state) / "langmem-sqlite" / "history" / f"{digest}.txt"


def _script(script: str) -> Iterable[str]:
    if script == "-":
        return sys.stdin.read().splitlines()
    path = Path(script)
    if not path.is_file():
        raise click.BadParameter(f"no such file {script!r}", param_hint="--script")
    return path.read_text(encoding="utf-8").splitlines()


def _typed(history: Path) -> Iterator[str]:
    """Lines typed at the `you>` prompt (prompt_toolkit: line editing, Up for the history
    kept in `history`). Ctrl-C cancels the line being typed; Ctrl-D on an empty line ends."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory

    history.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    session: PromptSession[str] = PromptSession(history=FileHistory(str(history)))
    while True:
        try:
            yield session.prompt("you> ")
        except KeyboardInterrupt:
            continue
        except EOFError:
            return


@cli.command()
@db_option
@click.option("--user", default="me", show_default=True, help="Whose memory.")
@click.option("--session", default=None, help="Session id (default: continue the latest).")
@click.option("--script", default=None, help="Read turns and /commands from FILE ('-': stdin).")
@click.option("--model", default=None, help="Model name (default gpt-4o-mini).")
@click.option("--base-url", default=None, help="An OpenAI-compatible server (e.g. a local one).")
@click.option("--offline", is_flag=True, help="Use the offline stand-in even with a key.")
@click.option("--max-tokens", type=count_range(200), default=None, help="Input budget.")
@click.option("--trigger-tokens", type=count_range(100), default=None, help="Summarize past this.")
@click.option("--tour", is_flag=True, help="Run a scripted offline chat twice on a new database.")
@prefix_option
def chat(
    db: str | None,
    user: str,
    session: str | None,
    script: str | None,
    model: str | None,
    base_url: str | None,
    offline: bool,
    max_tokens: int | None,
    trigger_tokens: int | None,
    tour: bool,
    prefix: str,
) -> None:
    """A terminal chat whose memory (thread, summary, facts) lives in the database.

    Without OPENAI_API_KEY or --base-url it says so and uses a rule-based offline stand-in
    (not an LLM). Commands: /summary /history /facts /remember /forget /new /session /help
    /quit. At the prompt, Ctrl-C cancels the line (or stops a reply), Ctrl-D leaves, and Up
    recalls what was typed before on this database.
    """
    if tour:
        from ..chat.tour import run_tour

        try:
            code = run_tour(db, prefix=prefix)
        except ValueError as e:  # not a new database, or a bad --prefix: nothing was written
            raise click.ClickException(str(e)) from e
        sys.exit(code)
    from ..chat.app import banner, open_chat, run_lines

    chat_session, chosen = open_chat(
        url(db),
        user=user,
        session=session,
        model=model,
        base_url=base_url,
        offline=offline,
        max_tokens=max_tokens,
        trigger_tokens=trigger_tokens,
        prefix=prefix,
    )
    banner(chat_session, chosen, out.line)
    if script is None and sys.stdin.isatty():
        lines = _typed(history_file(chat_session.memory.db.url))
        run_lines(chat_session, lines, out.line, show_input=False, interruptible=True)
    else:  # a script; piped input is one
        run_lines(chat_session, _script(script or "-"), out.line, show_input=True)
