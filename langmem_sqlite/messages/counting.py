"""Token counting for messages: exact (tiktoken), approximate, by message, or any callable."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from langchain_core.messages import BaseMessage

from ..defaults import INT64_MAX
from .checks import check_message_list
from .encodings import (
    ENCODING_NAMES,
    EncodingUnavailableError,
    check_encoding,
    encoding_name_for_model,
    install_shipped_encodings,
    is_openai_model,
)
from .encodings import encoding as load_encoding
from .per_message import (
    AUDIO_TOKENS,
    FILE_TOKENS,
    IMAGE_LOW_DETAIL_TOKENS,
    IMAGE_TOKENS,
    ExactCount,
    count_approximately,
    count_characters,
    has_calls,
)

__all__ = [
    "AUDIO_TOKENS",
    "FILE_TOKENS",
    "IMAGE_LOW_DETAIL_TOKENS",
    "IMAGE_TOKENS",
    "EncodingUnavailableError",
    "MessageCounter",
    "TokenCounter",
    "count_approximately",
    "count_characters",
    "count_tokens",
    "install_shipped_encodings",
    "resolve_message_counter",
]

MessageCounter = Callable[[BaseMessage], int]
"""A per-message counter: `message -> int`."""

_CACHE_LIMIT = 200_000


def _digest(value: Any) -> tuple[int, int]:
    text = json.dumps(value, sort_keys=True, default=repr, ensure_ascii=False)
    return len(text), hash(text)


class TokenCounter:
    """A per-message token counter (cached by message id and content) with a list total.

    Args:
        per_message: the uncached per-message function.
        name: a label (`"gpt-4o"`, `"approximate"`...), shown in results and errors.
        reply_overhead: tokens added once per model call (or a function computing them).
        cache: whether to cache counts.
        loader: loads what counting needs, for `load`.
    """

    def __init__(
        self,
        per_message: MessageCounter,
        *,
        name: str,
        reply_overhead: int | Callable[[], int] = 0,
        cache: bool = True,
        loader: Callable[[], Any] | None = None,
    ) -> None:
        if not callable(per_message):
            raise TypeError(f"per_message: expected a callable, got {type(per_message).__name__}")
        if not isinstance(name, str):
            raise TypeError(f"name: expected str, got {type(name).__name__}")
        if not callable(reply_overhead):
            _check_int(reply_overhead, "reply_overhead")
        self._fn = per_message
        self._loader = loader
        self.name = name
        self._overhead = reply_overhead
        self._cache: dict[Any, tuple[Any, int]] | None = {} if cache else None
        self._lock = threading.Lock()
        self.computed = 0  # cache misses

    def __repr__(self) -> str:
        return f"TokenCounter({self.name!r})"

    def load(self) -> None:
        """Load what counting needs (an exact counter's encoding) now, not at the first count.

        Raises:
            EncodingUnavailableError: the encoding cannot be loaded (offline, no local copy).
        """
        if self._loader is not None:
            self._loader()

    @property
    def reply_overhead(self) -> int:
        """Tokens counted once per model call (3 for OpenAI's reply priming)."""
        if callable(self._overhead):
            self._overhead = _check_int(self._overhead(), "reply_overhead")
        return self._overhead

    @staticmethod
    def _fingerprint(message: BaseMessage) -> tuple[Any, ...]:
        """A digest of what changes a count (holding no message body alive)."""
        content = message.content
        digest = (len(content), hash(content)) if isinstance(content, str) else _digest(content)
        calls = [getattr(message, name, None) for name in ("tool_calls", "invalid_tool_calls")]
        extra = [*calls, message.additional_kwargs]
        extra_digest = _digest(extra) if any(extra) else None
        return (message.type, digest, message.name, getattr(message, "role", None), extra_digest)

    def _key(self, message: BaseMessage) -> Any:
        if message.id:
            return (message.type, message.id)
        if isinstance(message.content, str) and not has_calls(message) and not message.name:
            return (message.type, None, message.content)
        return None

    def __call__(self, message: BaseMessage) -> int:
        """The message's count (cached)."""
        if not isinstance(message, BaseMessage):
            raise TypeError(f"message: expected a BaseMessage, got {type(message).__name__}")
        cache = self._cache
        key = self._key(message) if cache is not None else None
        if key is not None:
            hit = cache.get(key)  # type: ignore[union-attr]
            if hit is not None and hit[0] == self._fingerprint(message):
                return hit[1]
        value = _checked_count(self._fn(message))
        self.computed += 1
        if key is not None:
            with self._lock:
                if len(cache) >= _CACHE_LIMIT:  # type: ignore[arg-type]
                    for old in list(cache)[: _CACHE_LIMIT // 2]:  # type: ignore[arg-type]
                        cache.pop(old, None)  # type: ignore[union-attr]
                cache[key] = (self._fingerprint(message), value)  # type: ignore[index]
        return value

    def uncached(self, message: BaseMessage) -> int:
        """The message's count without the cache (for one-off variants of a message)."""
        return _checked_count(self._fn(message))

    def count(self, messages: Sequence[BaseMessage]) -> int:
        """Total for a list of messages (a model call), reply priming included.

        Raises:
            TypeError: `messages` is not a list of messages (a `str` is refused).
        """
        check_message_list(messages)
        return self.reply_overhead + sum(self(m) for m in messages)

    def clear_cache(self) -> None:
        """Forget cached counts."""
        if self._cache is not None:
            with self._lock:
                self._cache.clear()


def _checked_count(value: Any) -> int:
    """A count a per-message function returned: an `int` from 0 to `INT64_MAX`."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= INT64_MAX:
        raise ValueError(
            f"token_counter: returned {value!r}, expected an int from 0 to {INT64_MAX:_}"
        )
    return value


def _check_int(value: Any, name: str) -> int:
    """An `int` from 0 to `INT64_MAX` (messages/ loads no database code, so no `validation`)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= INT64_MAX:
        raise ValueError(f"{name}: expected an int from 0 to {INT64_MAX:_}, got {value!r}")
    return value


def _exact_counter(model: str, encoding: str) -> TokenCounter:
    return TokenCounter(
        ExactCount(encoding, model),
        name=model,
        reply_overhead=3,
        loader=lambda: load_encoding(encoding),
    )


def _model_counter(model: Any) -> TokenCounter:
    """A chat model's own count of `[m]` minus that of `[]`."""

    @lru_cache(maxsize=1)
    def overhead() -> int:
        return int(model.get_num_tokens_from_messages([]))

    def count(message: BaseMessage) -> int:
        return max(0, int(model.get_num_tokens_from_messages([message])) - overhead())

    label = str(getattr(model, "model_name", None) or type(model).__name__)
    return TokenCounter(count, name=label, reply_overhead=overhead)


def resolve_message_counter(spec: str | MessageCounter | Any | None) -> TokenCounter:
    """Return a `TokenCounter` for `spec`:

    * `None` or `"approximate"` (`"approx"`): a script-aware estimate, no tiktoken;
    * `"messages"` (`"count"`): every message counts 1; `"chars"` (`"characters"`):
      characters of text, tool calls and names;
    * an OpenAI model name (`"gpt-4o"`), an encoding (`"o200k_base"`) or
      `"tiktoken:<encoding>"`: exact counts, equal to ChatOpenAI's
      `get_num_tokens_from_messages`;
    * a chat model (with `get_num_tokens_from_messages`): its own count, per message;
    * any other callable `message -> int`.

    Media blocks have fixed costs (`IMAGE_TOKENS`, `FILE_TOKENS`...); reasoning blocks count
    their visible text only.

    Raises:
        ValueError: an unknown counter name.
        TypeError: a spec that is neither a string, a callable nor a chat model.
    """
    if isinstance(spec, TokenCounter):
        return spec
    if spec is None:
        spec = "approximate"
    if isinstance(spec, str):  # named counters are shared, and so are their caches
        return _named.get(spec) or _named.setdefault(spec, _new_named(spec))
    if hasattr(spec, "get_num_tokens_from_messages"):
        return _model_counter(spec)
    if callable(spec):
        label = getattr(spec, "__name__", None) or type(spec).__name__
        return TokenCounter(spec, name=str(label))
    raise TypeError(
        f"token_counter: expected a counter name, a callable or a chat model, got "
        f"{type(spec).__name__}"
    )


_named: dict[str, TokenCounter] = {}


def _new_named(spec: str) -> TokenCounter:
    name = spec.strip()
    if name in ("approximate", "approx"):
        return TokenCounter(count_approximately, name="approximate", reply_overhead=3)
    if name in ("messages", "count"):
        return TokenCounter(lambda message: 1, name="messages", cache=False)
    if name in ("chars", "characters"):
        return TokenCounter(count_characters, name="chars")
    if name.startswith("tiktoken:"):
        encoding = name.split(":", 1)[1]
        check_encoding(encoding, spec)
        return _exact_counter(encoding, encoding)
    if name in ENCODING_NAMES:
        return _exact_counter(name, name)
    if is_openai_model(name):
        return _exact_counter(name, encoding_name_for_model(name))
    raise ValueError(
        f"token_counter: unknown counter {spec!r}; expected 'approximate', 'messages', 'chars', "
        "an OpenAI model name ('gpt-4o'), an encoding ('o200k_base', 'tiktoken:cl100k_base'), "
        "a chat model or a callable message -> int"
    )


def count_tokens(
    messages: Sequence[BaseMessage], counter: str | MessageCounter | Any | None = None
) -> int:
    """Total tokens of `messages` as one model call with `counter` (any spec), reply
    priming included. With an OpenAI model name this equals ChatOpenAI's count."""
    return resolve_message_counter(counter).count(messages)
