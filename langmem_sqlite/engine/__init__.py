"""The execution layer: opening databases (`opening`), running units of work on them
(`database`, `unit`), one rules object per kind of database (`dialects`), and the one retry
rule (`retry`)."""

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
