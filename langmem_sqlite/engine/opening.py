"""Opening a database: [`get_database`][langmem_sqlite.get_database] turns a URL, a path, an
`Engine` or an `AsyncEngine` into the [`Database`][langmem_sqlite.Database] for it, one per URL or
engine (a `":memory:"` database is private to each opening, as `sqlite3.connect(":memory:")` is).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from sqlalchemy import exc
from sqlalchemy.engine import URL, Engine, create_engine, make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from .database import Database
from .dialects import rules_class

_ALIASES = {"postgres": "postgresql"}
"""Other spellings of a URL's driver name -> the one SQLAlchemy knows."""

DatabaseLike = str | os.PathLike[str] | URL | Engine | AsyncEngine
"""Anything [`get_database`][langmem_sqlite.get_database] accepts."""


def _to_url(target: str | os.PathLike[str] | URL) -> URL:
    if isinstance(target, URL):
        url = target
    else:
        text = os.fspath(target)
        if not text or not text.strip():
            raise ValueError("connection: empty database URL or path")
        if "://" not in text:
            # a plain path: a SQLite file (":memory:" stays in memory)
            if text == ":memory:":
                return make_url("sqlite://")
            return make_url("sqlite:///" + str(Path(text).expanduser().absolute()))
        try:
            url = make_url(text)
        except exc.ArgumentError as e:
            raise ValueError(f"connection: not a database URL: {text!r}") from e
    name = _ALIASES.get(url.drivername, url.drivername)
    url = url.set(drivername=name)
    return url.set(drivername=rules_class(url).default_drivers.get(name, name))


_registry: dict[Any, Database] = {}
_registry_lock = threading.Lock()


def _from_url(url: URL, engine_args: dict[str, Any], retry_seconds: float | None) -> Database:
    cls = rules_class(url)
    kwargs = cls.engine_kwargs(url)
    given = dict(engine_args)
    if "connect_args" in given:  # the caller's connect arguments win, one by one
        given["connect_args"] = {**kwargs.get("connect_args", {}), **given["connect_args"]}
    try:
        sync = create_engine(cls.driver_url(url), **{**kwargs, **given})
    except exc.NoSuchModuleError as e:
        raise ValueError(f"connection: unknown database kind {url.drivername!r}") from e
    except ImportError as e:
        extra = cls.extra or url.get_backend_name()
        raise ImportError(
            f"connection: the driver for {url.drivername!r} is not installed: "
            f"the package's {extra!r} extra (pip install '.[{extra}]' in its checkout; {e})"
        ) from e
    return Database(sync, retry_seconds=retry_seconds, owned=True)


def _from_async_engine(engine: AsyncEngine, retry_seconds: float | None) -> Database:
    url = engine.url
    cls = rules_class(url)
    sync_name = cls.sync_twins.get(url.drivername)
    if sync_name is None or cls.is_private(url):
        return Database(None, engine, retry_seconds=retry_seconds)
    surl = url.set(drivername=sync_name)
    sync = create_engine(cls.driver_url(surl), **cls.engine_kwargs(surl))
    return Database(sync, engine, retry_seconds=retry_seconds)


def get_database(
    connection: DatabaseLike | Database,
    *,
    engine_args: dict[str, Any] | None = None,
    retry_seconds: float | None = None,
) -> Database:
    """Return the [`Database`][langmem_sqlite.Database] for a URL, a path, an Engine or an
    AsyncEngine.

    Calling it again with the same URL (and arguments) or engine returns the same object, and
    so the same connection pools; an in-memory SQLite database (`":memory:"`,
    `"sqlite://"`) is new at every call: private to the object that asked for it.

    Args:
        connection: where the database is.
        engine_args: arguments for `create_engine` (URLs only; `connect_args` are merged
            with the package's, e.g. `{"connect_args": {"connect_timeout": 10}}`).
        retry_seconds: how long calls retry transient failures (default 30 s, or
            `$LANGMEM_SQLITE_RETRY_SECONDS`).

    Raises:
        ValueError: `connection` is empty, not a database URL, or `retry_seconds` is out
            of range.
        TypeError: `connection` is of an unsupported type.
    """
    if isinstance(connection, Database):
        return connection
    if retry_seconds is not None and (
        isinstance(retry_seconds, bool)
        or not isinstance(retry_seconds, int | float)
        or not 0 <= retry_seconds <= 86_400
    ):
        raise ValueError(f"retry_seconds: expected seconds from 0 to 86400, got {retry_seconds!r}")
    if isinstance(connection, AsyncEngine):
        key: Any = ("async", id(connection.sync_engine), retry_seconds)
        build: Callable[[], Database] = partial(_from_async_engine, connection, retry_seconds)
    elif isinstance(connection, Engine):
        key = ("sync", id(connection), retry_seconds)
        build = partial(Database, connection, retry_seconds=retry_seconds)
    elif isinstance(connection, str | os.PathLike | URL):
        url = _to_url(connection)
        extra = dict(engine_args or {})
        if rules_class(url).is_private(url):
            return _from_url(url, extra, retry_seconds)
        key = (
            "url",
            url.render_as_string(hide_password=False),
            repr(sorted(extra.items())),
            retry_seconds,
        )
        build = partial(_from_url, url, extra, retry_seconds)
    else:
        raise TypeError(
            "connection: expected a URL, a path, an Engine or an AsyncEngine, "
            f"got {type(connection).__name__}"
        )
    with _registry_lock:
        db = _registry.get(key)
        if db is None:  # the entry keeps its engine alive: an engine's id is not reused
            db = _registry[key] = build()
        return db


def reading_database(connection: DatabaseLike | Database) -> Database:
    """The [`Database`][langmem_sqlite.engine.Database] for `connection` opened only to
    read it: the package's tables are checked, never created or migrated (a missing or older
    schema raises [`SchemaNotReadyError`][langmem_sqlite.engine.migrations.SchemaNotReadyError]);
    a SQLite file refuses writes, keeps its journal mode, and is left without `-wal` or `-shm`
    once its connections close. An `Engine`, an `AsyncEngine` or a `Database` is returned as
    [`get_database`][langmem_sqlite.engine.get_database] returns it (its owner configured it).
    """
    if isinstance(connection, str | os.PathLike | URL):
        return get_database(
            connection, engine_args={"execution_options": {"langmem_reading": True}}
        )
    return get_database(connection)
