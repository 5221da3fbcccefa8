"""One object per kind of database: everything this package does differently per database.

A dialect is a subclass of `Dialect` in a module of its own, registered below with
`register`. Supporting a new database means writing that module (its engine settings,
how a transaction starts, which errors are transient, its column types, upserts and the
rules each feature asks for: `Dialect` lists them all with their defaults) and adding
it to `_BUILTIN`.
"""

from __future__ import annotations

from sqlalchemy.engine import URL, Engine

from .base import DEFAULT_CONNECT_TIMEOUT_S, Dialect
from .mysql import MySQLDialect
from .postgresql import PostgreSQLDialect
from .sqlite import SQLiteDialect

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT_S",
    "Dialect",
    "MySQLDialect",
    "PostgreSQLDialect",
    "SQLiteDialect",
    "dialect_class",
    "dialect_for",
    "dialect_named",
    "register",
    "registered",
]

_BY_NAME: dict[str, type[Dialect]] = {}


def register(cls: type[Dialect]) -> type[Dialect]:
    """Make `cls` the dialect of the SQLAlchemy dialect names it lists in `names`."""
    for name in cls.names:
        _BY_NAME[name] = cls
    return cls


_BUILTIN = (SQLiteDialect, PostgreSQLDialect, MySQLDialect)
for _cls in _BUILTIN:
    register(_cls)


def registered() -> tuple[type[Dialect], ...]:
    """Every registered dialect class, once each, in registration order."""
    return tuple(dict.fromkeys(_BY_NAME.values()))


def dialect_named(name: str) -> type[Dialect]:
    """The dialect class serving SQLAlchemy's dialect `name`; the base rules for a name no
    registered class serves (a SQLAlchemy dialect this package was not written for)."""
    return _BY_NAME.get(name, Dialect)


def dialect_class(url: URL) -> type[Dialect]:
    """The dialect class for a URL (`ValueError` for a database this package does not know)."""
    name = url.get_backend_name()
    cls = _BY_NAME.get(name)
    if cls is None:
        known = ", ".join(sorted(_BY_NAME))
        raise ValueError(f"connection: unsupported database kind {name!r} (known: {known})")
    return cls


def dialect_for(engine: Engine) -> Dialect:
    """A dialect object for `engine`."""
    return dialect_class(engine.url)(engine)
