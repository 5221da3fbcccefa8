"""Batch preparation: operations validated into a `Batch` (what to read, write and
embed), and the rows read turned into the `Item` and `SearchItem` values handed out (each
caller's own)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from langgraph.store.base import (
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    SearchItem,
    SearchOp,
)

from ..clock import dt
from ..engine.schema import ID_MAX_CHARS
from ..validation import check_text
from . import namespaces
from .checks import check_match, check_max_depth, check_page, check_ttl_minutes, check_value
from .filter_sql import SearchQuery
from .filters import check_filter
from .items import ItemRow, Put
from .sealed import Sealer
from .vectors import VectorIndex

__all__ = ["Batch", "Get", "Listing", "Preparer", "Put", "Search"]


class Get(NamedTuple):
    """A validated `GetOp`, the `at`-th operation of its batch (`ns` encoded)."""

    at: int
    ns: str
    key: str
    refresh_ttl: bool


class Search(NamedTuple):
    """A validated `SearchOp` (`text`: the query to embed, None without a vector query)."""

    at: int
    query: SearchQuery
    text: str | None
    refresh_ttl: bool


class Listing(NamedTuple):
    """A validated `ListNamespacesOp`."""

    at: int
    op: ListNamespacesOp


@dataclass
class Batch:
    """A validated batch: what to read, what to write (of several writes to one item, the
    last), what to embed."""

    size: int
    gets: list[Get] = field(default_factory=list)
    searches: list[Search] = field(default_factory=list)
    lists: list[Listing] = field(default_factory=list)
    puts: dict[tuple[str, str], Put] = field(default_factory=dict)

    @property
    def texts(self) -> list[str]:
        return [text for put in self.puts.values() for _, text in put.texts]

    @property
    def queries(self) -> list[str]:
        return [s.text for s in self.searches if s.text is not None]


def _matches_path(condition: MatchCondition, ns: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(ns) < len(path):
        return False
    part = ns[: len(path)] if condition.match_type == "prefix" else ns[len(ns) - len(path) :]
    return all(p in ("*", n) for p, n in zip(path, part, strict=True))


def literal_prefix(op: ListNamespacesOp) -> tuple[str, ...]:
    """The leading labels (before any `*`) every listed namespace must start with."""
    for condition in op.match_conditions or ():
        if condition.match_type == "prefix":
            labels = []
            for label in condition.path:
                if label == "*":
                    break
                labels.append(label)
            return tuple(labels)
    return ()


def shape_namespaces(op: ListNamespacesOp, found: list[tuple[str, ...]]) -> list[Any]:
    kept = [ns for ns in found if all(_matches_path(c, ns) for c in op.match_conditions or ())]
    if op.max_depth is not None:
        kept = sorted({ns[: op.max_depth] for ns in kept})
    return kept[op.offset : op.offset + op.limit]


def _fresh(value: Any) -> Any:
    """A copy of a JSON value (its objects and arrays new, its scalars shared: immutable)."""
    if type(value) is dict:
        out = value.copy()
        for k, v in out.items():
            if type(v) is dict or type(v) is list:
                out[k] = _fresh(v)
        return out
    if type(value) is list:
        return [_fresh(v) if type(v) is dict or type(v) is list else v for v in value]
    return value


def item_of(row: ItemRow, again: bool = False) -> Item:
    """The item of a row (`again`: a row already handed out, whose value is copied)."""
    return Item(
        value=_fresh(row.value) if again else row.value,
        key=row.key,
        namespace=row.ns,
        created_at=dt(row.created_at),
        updated_at=dt(row.updated_at),
    )


def search_item_of(row: ItemRow) -> SearchItem:
    return SearchItem(
        row.ns, row.key, row.value, dt(row.created_at), dt(row.updated_at), score=row.score
    )


class Preparer:
    """The validation of [`SQLStore`][langmem_sqlite.SQLStore]'s operations (sync and async
    alike: it runs before anything is read, written or embedded).

    Args:
        index: the semantic index (None: nothing to embed).
        omit_expired: lapsed items are never returned.
        nul_ok: values may hold NUL characters (not in PostgreSQL's `jsonb`).
        sealer: encrypts values at rest (None: plaintext).
    """

    def __init__(
        self, index: VectorIndex | None, omit_expired: bool, nul_ok: bool, sealer: Sealer | None
    ) -> None:
        self.index = index
        self.omit_expired = omit_expired
        self._nul_ok = nul_ok
        self._sealer = sealer

    def batch(self, ops: Iterable[Op]) -> Batch:
        """The validated batch of `ops`, in order."""
        prepared = [self._prepare_op(i, op) for i, op in enumerate(ops)]
        batch = Batch(len(prepared))
        for p in prepared:
            if isinstance(p, Get):
                batch.gets.append(p)
            elif isinstance(p, Search):
                batch.searches.append(p)
            elif isinstance(p, Listing):
                batch.lists.append(p)
            else:
                batch.puts.pop((p.ns, p.key), None)  # the last write goes last
                batch.puts[(p.ns, p.key)] = p
        return batch

    def _prepare_op(self, at: int, op: Op) -> Get | Search | Listing | Put:
        if isinstance(op, GetOp):
            ns = namespaces.encoded(op.namespace, allow_empty=True)
            key = check_text(op.key, "key", max_chars=ID_MAX_CHARS)
            return Get(at, ns, key, op.refresh_ttl)
        if isinstance(op, PutOp):
            return self._prepare_put(op)
        if isinstance(op, SearchOp):
            return self._prepare_search(at, op)
        if isinstance(op, ListNamespacesOp):
            conditions = tuple(check_match(c) for c in op.match_conditions or ())
            check_max_depth(op.max_depth)
            check_page(op.limit, "limit")
            check_page(op.offset, "offset")
            return Listing(at, op._replace(match_conditions=conditions))
        raise TypeError(f"ops: unknown operation type {type(op).__name__}")

    def _prepare_put(self, op: PutOp) -> Put:
        ns = namespaces.encoded(op.namespace)
        key = check_text(op.key, "key", max_chars=ID_MAX_CHARS)
        value, text = check_value(op.value, self._nul_ok)
        if self._sealer is not None and text is not None:
            text = self._sealer.seal(ns, key, text)
        ttl_us = check_ttl_minutes(op.ttl, "ttl")
        if op.index not in (None, False) and (
            isinstance(op.index, str) or not all(isinstance(f, str) for f in op.index)  # type: ignore[union-attr]
        ):
            raise TypeError("index: expected False, None or a list of field paths")
        texts: list[tuple[str, str]] = []
        if self.index is not None and value is not None and op.index is not False:
            texts = self.index.texts(value, None if op.index is None else list(op.index))
        return Put(ns, key, value, ttl_us, text, tuple(texts))

    def _prepare_search(self, at: int, op: SearchOp) -> Search:
        prefix = namespaces.check_namespace(
            op.namespace_prefix, "namespace_prefix", allow_empty=True
        )
        if op.query is not None and not isinstance(op.query, str):
            raise TypeError(f"query: expected str, got {type(op.query).__name__}")
        query = SearchQuery(
            prefix,
            check_filter(op.filter),
            check_page(op.limit, "limit"),
            check_page(op.offset, "offset"),
            self.omit_expired,
            self._sealer,
        )
        text = op.query if (op.query and self.index is not None) else None
        return Search(at, query, text, op.refresh_ttl)
