"""The `langmem-sqlite` command line: chat with memory, look inside a database, maintain it,
move it to another database.

Examples:
    ```bash
    langmem-sqlite chat --tour                  # a scripted offline chat, restarted
    langmem-sqlite chat --db chat.db --user ada # talk (ChatOpenAI with OPENAI_API_KEY)
    langmem-sqlite users --db chat.db
    langmem-sqlite history s1 --db chat.db --limit 10 --json
    langmem-sqlite export s1 --db chat.db --format md
    langmem-sqlite prune --older-than 90 --dry-run --db chat.db
    langmem-sqlite forget-user ada --dry-run --db chat.db
    langmem-sqlite import history sqlite:///old.db --db chat.db
    langmem-sqlite copy --from chat.db --to postgresql://user@host/db
    langmem-sqlite migrate --db postgresql://user@host/db
    ```

Listings print a table, or JSON with `--json`; errors are one line on stderr with a non-zero
exit status. One module per group of commands (`chat`, `inspect`, `maintain`, `imports`), each
importing the library only when a command runs.
"""

from . import chat, imports, inspect, maintain  # noqa: F401  (they register their commands)
from .base import cli, main

__all__ = ["cli", "main"]
