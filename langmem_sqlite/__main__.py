"""`python -m langmem_sqlite` is the `langmem-sqlite` command."""

from .cli import main

main()
