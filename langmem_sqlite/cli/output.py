"""The command line's one output path (`Output`): stored text is shown as text, never
interpreted. Rich gets only `Text` objects with markup, emoji and highlighting off, and
control characters (ANSI escapes, bidirectional overrides) are spelled out (`visible`), so
stored data cannot move the cursor, recolour the screen or hide text; JSON escapes them.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable
from typing import IO, Any

# C0 controls but tab and newline, DEL, C1 controls, bidirectional marks and overrides.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# ... and in a table cell also newline, which would split the row
_CELL_UNSAFE = re.compile(f"[\n{_UNSAFE.pattern[1:-1]}]")
# What json.dumps(ensure_ascii=False) leaves raw of the above (it escapes C0 controls itself),
# plus the two line separators some readers treat as line ends.
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _spelled(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """`text` with every control character spelled out (`"\\x1b"` for ESC); tab and newline
    are kept."""
    return _UNSAFE.sub(_spelled, text)


def count(n: int, noun: str) -> str:
    """`n` and the noun in its number: `"1 session"`, `"2 sessions"`."""
    return f"{n} {noun if n == 1 else noun + 's'}"


Part = str | tuple[str, str]
"""A piece of a line: plain text, or `(text, style)` (a Rich style name such as `"bold"`)."""


class Output:
    """Lines, tables and JSON on one stream (stdout, or stderr with `stderr=True`).

    The Rich console is made on first use (importing Rich costs start-up time that `--help`
    should not pay).
    """

    def __init__(self, *, stderr: bool = False, file: IO[str] | None = None) -> None:
        self._stderr = stderr
        self._file = file

    @property
    def stream(self) -> IO[str]:
        """Where this output goes (looked up on each call: tests swap `sys.stdout`)."""
        if self._file is not None:
            return self._file
        return sys.stderr if self._stderr else sys.stdout

    def _console(self, *, table: bool = False) -> Any:
        from rich.console import Console

        stream = self.stream
        tty = bool(getattr(stream, "isatty", lambda: False)())
        # a terminal's width; pipes get one line per row (grep finds whole rows), not Rich's 80
        width = None if tty or not table else 100_000
        return Console(
            file=stream,
            markup=False,
            emoji=False,
            highlight=False,
            width=width,
            soft_wrap=not table,  # a line is never wrapped or cut by Rich
        )

    def line(self, *parts: Part) -> None:
        """Print one line made of `parts`, each shown as it is (see `visible`)."""
        from rich.text import Text

        text = Text()
        for part in parts:
            if isinstance(part, tuple):
                text.append(visible(part[0]), style=part[1])
            else:
                text.append(visible(part))
        self._console().print(text)

    def table(self, columns: Iterable[str], rows: Iterable[Iterable[Any]]) -> None:
        """A table; `None` cells print empty, every other cell as `str(value)` with its
        control characters and newlines spelled out (a row stays one row)."""
        from rich.table import Column, Table
        from rich.text import Text

        # headers are Text too (a str header would be read as markup); a long cell wraps
        # ("fold"), it is never cut short
        table = Table(*(Column(Text(c), overflow="fold") for c in columns))
        for row in rows:
            table.add_row(
                *(Text("" if v is None else _CELL_UNSAFE.sub(_spelled, str(v))) for v in row)
            )
        self._console(table=True).print(table)

    def json(self, data: Any) -> None:
        """`data` as indented JSON (UTF-8, not `\\u` escapes, but for control characters)."""
        text = json.dumps(data, default=str, ensure_ascii=False, indent=2)
        self.stream.write(_JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n")

    def raw(self, text: str) -> None:
        """Exactly `text` (a file being written: an export); spelled out when the stream is
        a terminal, where control characters would be interpreted."""
        stream = self.stream
        if getattr(stream, "isatty", lambda: False)():
            text = visible(text)
        stream.write(text)


out = Output()
"""Standard output."""

err = Output(stderr=True)
"""Standard error: errors, progress, notes."""
