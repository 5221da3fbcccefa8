"""How one message is counted (approximately, in characters, exactly with tiktoken), as
OpenAI's chat format sends it: pure functions, cached by `counting`."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
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

from .encodings import encoding

IMAGE_TOKENS = 765
"""Fixed cost of an image block: OpenAI's price of a 1024x1024 image at high detail."""
IMAGE_LOW_DETAIL_TOKENS = 85
"""Fixed cost of an image block with `detail="low"` (OpenAI's flat low-detail price)."""
FILE_TOKENS = 1_500
"""Fixed cost of a file block (about two pages of a PDF, text and page image)."""
AUDIO_TOKENS = 1_000
"""Fixed cost of an audio block."""


def _media_tokens(block: dict[str, Any]) -> int | None:
    """The fixed cost of a media content block, `None` for other blocks."""
    kind = block.get("type")
    if kind in ("image_url", "input_image", "image"):
        detail = block.get("detail")
        if kind == "image_url" and isinstance(block.get("image_url"), dict):
            detail = block["image_url"].get("detail", detail)
        return IMAGE_LOW_DETAIL_TOKENS if detail == "low" else IMAGE_TOKENS
    if kind in ("file", "input_file", "document"):
        return FILE_TOKENS
    if kind in ("audio", "input_audio"):
        return AUDIO_TOKENS
    return None


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
    if isinstance(content, str):
        return ([content] if content else []), 0
    if not isinstance(content, list):
        return ([str(content)] if content else []), 0
    texts: list[str] = []
    media = 0
    for block in content:
        cost = _media_tokens(block) if isinstance(block, dict) else None
        if cost is not None:
            media += cost
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


def has_calls(message: BaseMessage) -> bool:
    return isinstance(message, AIMessage) and bool(
        message.tool_calls
        or message.invalid_tool_calls
        or message.additional_kwargs.get("tool_calls")
        or message.additional_kwargs.get("function_call")
    )


def _content_for_wire(message: BaseMessage) -> Any:
    """Content as OpenAI's chat format sends it (`""` becomes null beside tool calls)."""
    content = message.content
    if isinstance(message, AIMessage) and not content and has_calls(message):
        return None
    return content


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


def _piece_tokens(piece: str) -> float:
    """Tokens of one piece of `_PIECE`."""
    first = piece[0]
    if "\u3000" <= first <= "\uffef":
        return 0.75
    if first.isalpha():
        return 1.0 + max(0, len(piece) - 6) / 5.0
    if first.isdigit():
        return 1.0
    return float((len(piece) + 1) // 2)


def _approx_text(text: str) -> float:
    """Estimate of the tokens of a text, close to o200k/cl100k on English, code, CJK and logs."""
    total = 0.0
    for piece in _PIECE.findall(text):  # in order: the float sum stored counts were made with
        total += _piece_tokens(piece)
    return total


def count_approximately(message: BaseMessage) -> int:
    """Estimate of a message's tokens in OpenAI's chat format, without tiktoken: word, number,
    punctuation and CJK pieces as BPE tokenizers split them, overheads and media costs."""
    texts, media = _content_parts(_content_for_wire(message))
    calls = _call_texts(message)
    name = _name(message)
    extra = 3.0 + 1 + media  # per-message overhead and the role
    if isinstance(message, ToolMessage):
        extra += 3
    if name is not None:
        extra += 1 + _approx_text(name)
    return round(extra + sum(map(_approx_text, texts)) + sum(map(_approx_text, calls)))


def count_characters(message: BaseMessage) -> int:
    """The characters of a message's text, tool calls and name (media blocks count 0)."""
    texts, _ = _content_parts(_content_for_wire(message))
    name = _name(message) or ""
    return sum(len(t) for t in texts) + sum(len(t) for t in _call_texts(message)) + len(name)


class ExactCount:
    """OpenAI's chat-format count with a tiktoken encoding (LangChain's formula for OpenAI)."""

    def __init__(self, encoding: str, model: str) -> None:
        self.encoding_name = encoding
        legacy = model.startswith("gpt-3.5-turbo-0301")
        self.per_message = 4 if legacy else 3
        self.per_name = -1 if legacy else 1

    def tokens(self, text: str) -> int:
        return len(encoding(self.encoding_name).encode_ordinary(text))

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
