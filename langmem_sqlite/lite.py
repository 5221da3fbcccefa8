"""Compatibility name: the light lane's connection is the execution seam's
:class:`~langmem_sqlite.engine.session.Session`."""

from __future__ import annotations

from .engine.session import Result as LiteResult
from .engine.session import Session as LiteConnection

__all__ = ["LiteConnection", "LiteResult"]
