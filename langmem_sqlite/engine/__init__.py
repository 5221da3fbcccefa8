"""The execution layer: databases, their dialect objects, the seam every statement goes through,
and the one retry rule.

* :mod:`.database`: :func:`get_database` turns a URL, a path or an engine into a
  :class:`Database`, which runs units of work (sync, async, and plans of several units);
  :func:`reading_database` opens one only to read it;
* :mod:`.session`: the :class:`Session` a storage function receives, and the one bounded cache
  of compiled statements;
* :mod:`.dialects`: one object per kind of database (SQLite, PostgreSQL, MySQL/MariaDB);
* :mod:`.retry`: which failures are retried, for how long, and the typed error after that.
"""

from .database import Database, DatabaseLike, Plan, Step, get_database, reading_database
from .errors import DatabaseUnavailableError
from .retry import DEFAULT_RETRY_SECONDS, Fault
from .session import Result, Session

__all__ = [
    "DEFAULT_RETRY_SECONDS",
    "Database",
    "DatabaseLike",
    "DatabaseUnavailableError",
    "Fault",
    "Plan",
    "Result",
    "Session",
    "Step",
    "get_database",
    "reading_database",
]
