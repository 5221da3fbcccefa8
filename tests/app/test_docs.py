"""The documentation site builds with `mkdocs build --strict` and renders the docstrings as
Markdown: no reST role left as text, every public name on its page, the notebooks with their
nav titles and sections, and an unresolved cross-reference fails the build."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from html import unescape
from pathlib import Path

import pytest

pytest.importorskip("mkdocs")
pytest.importorskip("mkdocstrings_handlers.python")
pytest.importorskip("mkdocs_jupyter")

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
ROLE = re.compile(r":(class|meth|func|mod|data|attr|exc|obj):")


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _text(page: Path) -> str:
    """The page's visible text (tags dropped)."""
    return unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("site")
    built = _build(ROOT / "mkdocs.yml", site)
    assert built.returncode == 0, built.stderr
    return site


def test_reference_pages_show_no_rest_markup(site: Path) -> None:
    pages = sorted((site / "reference").glob("*/index.html"))
    assert len(pages) >= 7
    for page in pages:
        text = _text(page)
        assert not ROLE.findall(text), page
        assert "::\n" not in text, page
        assert "``" not in text, page


def test_cross_references_link_to_the_rendered_objects(site: Path) -> None:
    page = (site / "reference" / "chat_history" / "index.html").read_text(encoding="utf-8")
    # the module docstring's "over ConversationStore" links to the class's entry
    link = r'over\s+<a [^>]*href="#langmem_sqlite\.history\.store\.ConversationStore"'
    assert re.search(link, page)


def test_public_names_have_an_entry(site: Path) -> None:
    context = (site / "reference" / "context" / "index.html").read_text(encoding="utf-8")
    for name in ("context.middleware.ContextMiddleware", "messages.count_tokens"):
        assert f'id="langmem_sqlite.{name}"' in context, name
    checkpoint = (site / "reference" / "checkpoint" / "index.html").read_text(encoding="utf-8")
    assert 'id="langmem_sqlite.checkpoint.codec.CheckpointEncryptionError"' in checkpoint
    database = (site / "reference" / "database" / "index.html").read_text(encoding="utf-8")
    assert 'id="langmem_sqlite.crypto.MessageCipher"' in database


def test_user_conversation_fields_is_shown_without_its_value(site: Path) -> None:
    text = _text(site / "reference" / "chat_history" / "index.html")
    assert "USER_CONVERSATION_FIELDS" in text
    assert "ConfigurableFieldSpec(" not in text


def test_notebook_pages_keep_nav_titles_and_list_their_sections(site: Path) -> None:
    page = (site / "notebooks" / "01_chat_history" / "index.html").read_text(encoding="utf-8")
    title = re.search(r"<title>(.*?)</title>", page, re.S)
    assert title and "RunnableWithMessageHistory" in title.group(1)
    toc = page.split('aria-label="Table of contents"', 1)[1]
    assert "Reading it back" in toc.split("</nav>", 1)[0]


def test_an_unresolved_cross_reference_fails_the_strict_build(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "css").mkdir(parents=True)
    (docs / "css" / "extra.css").write_text("")
    (docs / "index.md").write_text("See [`Nope`][langmem_sqlite.Nope].\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text(
        f"INHERIT: {ROOT / 'mkdocs.yml'}\ndocs_dir: {docs}\nnav:\n  - Home: index.md\n"
    )
    built = _build(config, tmp_path / "site")
    assert built.returncode != 0
    assert "Could not find cross-reference target 'langmem_sqlite.Nope'" in built.stderr
