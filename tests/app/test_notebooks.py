"""Every tutorial notebook runs top to bottom offline (nbclient), and its outputs stay small."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from support import server_url

from langmem_sqlite.engine import get_database
from langmem_sqlite.engine.schema import get_tables

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


def test_there_are_four_tutorials() -> None:
    assert len(NOTEBOOKS) == 4


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert path.stat().st_size < 64_000, "committed outputs must stay small"
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    prefix = f"nb{uuid.uuid4().hex[:8]}_"
    if path.name.startswith("04"):
        monkeypatch.setenv("LANGMEM_NOTEBOOK_POSTGRES_URL", server_url("postgres"))
        monkeypatch.setenv("LANGMEM_NOTEBOOK_TABLE_PREFIX", prefix)
    book = nbformat.read(path, as_version=4)
    try:
        NotebookClient(
            book,
            timeout=180,
            kernel_name="python3",
            resources={"metadata": {"path": str(path.parent)}},
        ).execute(env=dict(os.environ))  # raises CellExecutionError on any error
    finally:
        if path.name.startswith("04"):
            get_tables(prefix).metadata.drop_all(get_database(server_url("postgres")).sync_engine)
    errors = [
        o for c in book.cells for o in c.get("outputs", []) if o.get("output_type") == "error"
    ]
    assert not errors
