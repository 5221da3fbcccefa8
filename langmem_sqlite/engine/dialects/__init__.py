"""One `Rules` subclass per kind of database, each in a module of its own and listed in
`BUILTIN`: what this package does differently per database (`Rules` lists every rule with its
default). A rule only one whole-database operation needs lives with that operation
(`langmem_sqlite.operations.per_database`).
"""

from __future__ import annotations

from sqlalchemy.engine import URL, Engine

from .base import Rules
from .mysql import MySQLRules
from .postgresql import PostgreSQLRules
from .sqlite import SQLiteRules

__all__ = [
    "BUILTIN",
    "MySQLRules",
    "PostgreSQLRules",
    "Rules",
    "SQLiteRules",
    "rules_class",
    "rules_for",
    "rules_named",
]

BUILTIN: tuple[type[Rules], ...] = (SQLiteRules, PostgreSQLRules, MySQLRules)
"""Every rules class, each serving the SQLAlchemy dialect names it lists in `names`."""

_BY_NAME = {name: cls for cls in BUILTIN for name in cls.names}


def rules_named(name: str) -> type[Rules]:
    """The rules class serving SQLAlchemy's dialect `name`; the base rules for a name no
    class in `BUILTIN` serves (a SQLAlchemy dialect this package was not written for)."""
    return _BY_NAME.get(name, Rules)


def rules_class(url: URL) -> type[Rules]:
    """The rules class for a URL (`ValueError` for a database this package does not know)."""
    name = url.get_backend_name()
    cls = _BY_NAME.get(name)
    if cls is None:
        known = ", ".join(sorted(_BY_NAME))
        raise ValueError(f"connection: unsupported database kind {name!r} (known: {known})")
    return cls


def rules_for(engine: Engine) -> Rules:
    """A rules object for `engine`."""
    return rules_class(engine.url)(engine)
