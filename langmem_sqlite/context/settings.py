"""A policy's configuration: the known model windows, the defaults, the validation."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any, Literal

from ..validation import INT64_MAX, check_positive

MODEL_CONTEXT_WINDOWS: dict[str, int] = {
    "gpt-4o": 128_000,
    "chatgpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "gpt-5": 400_000,
    "o1": 200_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    "claude-": 200_000,
    "gemini-1.5-pro": 2_097_152,
    "gemini-": 1_048_576,
}
"""Context windows of known models, by name prefix (longest prefix wins, case ignored; a
fine-tuned `ft:<model>:...` has its base model's). With `model=`, the default budget is the
window minus a reply reserve (a quarter of it, at most 16,384 tokens)."""

SummaryPlacement = Literal["system", "message"]


def window_for(model: str) -> int | None:
    """The context window of `model` (see `MODEL_CONTEXT_WINDOWS`), or `None`."""
    model = model.lower().removeprefix("ft:")
    best = max((p for p in MODEL_CONTEXT_WINDOWS if model.startswith(p)), key=len, default="")
    return MODEL_CONTEXT_WINDOWS[best] if best else None


def default_max_tokens(model: str | None) -> int | None:
    """The default budget for `model`: its window minus the reply reserve, if known."""
    window = window_for(model) if model is not None else None
    return window - min(16_384, window // 4) if window else None


def check_numbers(numbers: dict[str, Any], facts_share: Any) -> None:
    """Ints from 1 to `INT64_MAX` (or `None`), `facts_share` strictly between 0 and 1."""
    for name, value in numbers.items():
        if value is not None:
            check_positive(value, name)
    if (
        isinstance(facts_share, bool)
        or not isinstance(facts_share, int | float)
        or not math.isfinite(facts_share)
        or not 0 < facts_share < 1
    ):
        raise ValueError(f"facts_share: expected a number above 0 and below 1, got {facts_share!r}")


@dataclass(frozen=True)
class SummarySettings:
    """The summarization settings of a policy, validated, with their defaults filled in."""

    trigger_tokens: int | None
    trigger_messages: int | None
    keep_tokens: int | None
    keep_messages: int | None
    max_summary_tokens: int
    max_summarizer_input_tokens: int

    @classmethod
    def make(cls, summarizer: Any, max_tokens: int | None, **given: int | None) -> SummarySettings:
        """The settings `given` (checked numbers), defaults filled in, for this policy."""
        trigger_tokens = given.get("trigger_tokens")
        trigger_messages = given.get("trigger_messages")
        keep_tokens = given.get("keep_tokens")
        keep_messages = given.get("keep_messages")
        timing = (trigger_tokens, trigger_messages, keep_tokens, keep_messages)
        if summarizer is None:
            if any(v is not None for v in timing):
                raise ValueError("summarizer: trigger/keep settings need a summarizer model")
        elif not (hasattr(summarizer, "invoke") and hasattr(summarizer, "ainvoke")):
            raise TypeError("summarizer: expected a chat model or Runnable")
        elif trigger_tokens is None and trigger_messages is None:
            if max_tokens is None:
                raise ValueError("trigger_tokens: required with a summarizer and no max_tokens")
            trigger_tokens = max_tokens
        base = max_tokens or trigger_tokens or 4_000
        given_cap = given.get("max_summary_tokens")
        max_summary_tokens = given_cap if given_cap is not None else max(64, min(2_000, base // 8))
        if summarizer is not None and trigger_tokens is not None:
            if keep_tokens is None:
                keep_tokens = max(1, trigger_tokens * 3 // 10)
            if keep_tokens < trigger_tokens <= keep_tokens + max_summary_tokens:
                warnings.warn(
                    f"keep_tokens + max_summary_tokens ({keep_tokens} + "
                    f"{max_summary_tokens}) reach trigger_tokens={trigger_tokens}: "
                    "the summarizer may run on almost every call",
                    stacklevel=3,
                )
        _check_hysteresis(keep_tokens, trigger_tokens, "keep_tokens", "trigger_tokens")
        _check_hysteresis(keep_messages, trigger_messages, "keep_messages", "trigger_messages")
        if summarizer is not None and max_tokens and max_summary_tokens >= max_tokens:
            raise ValueError(
                f"max_summary_tokens: must be below max_tokens ({max_summary_tokens} >= "
                f"{max_tokens})"
            )
        max_input = given.get("max_summarizer_input_tokens")
        if max_input is None:
            max_input = min(INT64_MAX, (trigger_tokens or base) + max_summary_tokens)
        if summarizer is not None and max_input <= max_summary_tokens + 200:
            raise ValueError(
                "max_summarizer_input_tokens: must leave room for new material beside the "
                f"previous summary (> max_summary_tokens + 200 = {max_summary_tokens + 200})"
            )
        return cls(
            trigger_tokens,
            trigger_messages,
            keep_tokens,
            keep_messages,
            max_summary_tokens,
            max_input,
        )


def _check_hysteresis(keep: int | None, trigger: int | None, kname: str, tname: str) -> None:
    if keep is None or trigger is None:
        return
    if keep >= trigger:
        raise ValueError(
            f"{kname}: must be below {tname} ({keep} >= {trigger}); otherwise the "
            "summarizer would run on almost every call"
        )
    if keep > trigger * 0.75:
        warnings.warn(
            f"{kname}={keep} is close to {tname}={trigger}: the summarizer will run "
            f"about every {max(1, trigger - keep)} {tname.split('_')[1]}",
            stacklevel=4,
        )
