"""The execution layer: databases, their rules objects, the unit of work a storage function
receives, and the one retry rule.

* `opening`: [`get_database`][langmem_sqlite.engine.get_database] turns a URL, a path or an
  engine into a [`Database`][langmem_sqlite.engine.Database];
  [`reading_database`][langmem_sqlite.engine.reading_database] opens one only to read it;
* `database`: the `Database`, which runs units of work (sync, async, and plans of several
  units);
* `unit`: the [`Unit`][langmem_sqlite.engine.Unit] a storage function receives (a
  SQLAlchemy `Connection` and the database's rules);
* `dialects`: one object per kind of database (SQLite, PostgreSQL, MySQL/MariaDB);
* `retry`: which failures are retried, for how long, and the typed error after that.
"""

from .database import Database, Plan, Step
from .opening import DatabaseLike, get_database, reading_database
from .retry import DEFAULT_RETRY_SECONDS, DatabaseUnavailableError, Fault
from .unit import Unit

__all__ = [
    "DEFAULT_RETRY_SECONDS",
    "Database",
    "DatabaseLike",
    "DatabaseUnavailableError",
    "Fault",
    "Plan",
    "Step",
    "Unit",
    "get_database",
    "reading_database",
]
