"""The `langmem-sqlite` command line (see the README's command list): one module per group of
commands (`chat`, `inspect`, `maintain`, `imports`), each importing the library only when a
command runs; listings print a table or `--json`, errors one line on stderr."""

from . import chat, imports, inspect, maintain  # noqa: F401  (they register their commands)
from .base import cli, main

__all__ = ["cli", "main"]
