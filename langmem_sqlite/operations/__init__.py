"""Whole-database operations, each a library function the CLI also calls:
[`copy`][langmem_sqlite.operations.copy], [`erasure`][langmem_sqlite.operations.erasure],
[`export`][langmem_sqlite.operations.export],
[`maintenance`][langmem_sqlite.operations.maintenance],
[`importers`][langmem_sqlite.operations.importers]."""
