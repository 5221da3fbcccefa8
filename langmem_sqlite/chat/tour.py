"""`langmem-sqlite chat --tour`: a scripted offline chat, restarted, on a fresh SQLite file.

Process 1 chats (facts are remembered, the summary starts once the trigger is passed) and
exits; process 2 starts cold on the same file, continues the conversation, then opens a new
session where only the long-term facts carry over. The model is the offline stand-in (not an
LLM): its answers come only from what the memory hands it.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

__all__ = ["FIRST_RUN", "SECOND_RUN", "run_tour"]

FIRST_RUN = """\
Hi, my name is Ada.
I live in Lyon.
I like green tea.
I am planning a trip to the Alps next month.
The trip is for hiking, mostly in the Vanoise park.
I will travel by train from Lyon.
/summary
/facts
"""

SECOND_RUN = """\
What is my name?
/history 4
/new
Where do I live?
What do I like?
"""

_OPTIONS = ["--user", "ada", "--offline", "--max-tokens", "800", "--trigger-tokens", "300"]
_EXPECTED = (
    "summary of",
    "Your name is Ada (found in",
    "You live in Lyon (found in long-term facts)",
    "You like green tea (found in long-term facts)",
)


def run_tour(db: str | Path = "langmem-tour.db") -> int:
    """Run both processes against the SQLite file `db` (recreated); 0 if all was recalled."""
    path = Path(db).expanduser().absolute()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    print(f"Memory file: {path}")
    seen = ""
    for n, (title, script) in enumerate(
        (("a new conversation", FIRST_RUN), ("after a restart", SECOND_RUN)), start=1
    ):
        print(f"\n=== process {n}: {title} ===")
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "langmem_sqlite",
                "chat",
                "--db",
                str(path),
                *_OPTIONS,
                "--script",
                "-",
            ],
            input=script,
            capture_output=True,
            text=True,
            check=False,
        )
        sys.stdout.write(proc.stdout)
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr)
            return proc.returncode
        seen += proc.stdout
    missing = [e for e in _EXPECTED if e not in seen]
    if missing:
        print(f"\nFAILED: expected {missing}")
        return 1
    print(
        "\nThe second process continued the conversation from the file, and a new session "
        f"recalled the long-term facts. Chat yourself: langmem-sqlite chat --db {shlex.quote(str(db))} --user ada"
    )
    return 0
