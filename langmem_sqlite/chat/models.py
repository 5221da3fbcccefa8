"""Which model the chat talks to: ChatOpenAI, any OpenAI-compatible server, or offline."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from .offline import OFFLINE_LABEL, OfflineChatModel

__all__ = ["ChosenModel", "choose_model"]

DEFAULT_MODEL = "gpt-4o-mini"
_OPENAI_API = "https://api.openai.com/v1"


@dataclass(frozen=True)
class ChosenModel:
    """The chat model, a human-readable label, and whether it is the offline stand-in."""

    model: Any
    label: str
    offline: bool
    name: str
    why: str = ""
    """Why this model was chosen (shown by the chat's banner)."""
    endpoint: str | None = None
    """The OpenAI-compatible server it talks to (`--base-url`, or `OPENAI_BASE_URL` in the
    environment), `None` for the OpenAI API and the offline stand-in."""


def choose_model(
    model: str | None = None,
    *,
    base_url: str | None = None,
    offline: bool = False,
    env: dict[str, str] | None = None,
) -> ChosenModel:
    """`ChatOpenAI` when `OPENAI_API_KEY` is set or `base_url` is given (any
    OpenAI-compatible server, e.g. a local one), else the offline stand-in.

    The label names the server the model talks to: `base_url`, else `OPENAI_BASE_URL` when it
    points away from the OpenAI API.

    Raises:
        ValueError: `offline` together with `base_url`.
        ImportError: a real model is wanted but `langchain-openai` is not installed.
    """
    env = dict(os.environ) if env is None else env
    if offline and base_url:
        raise ValueError("base_url: cannot be combined with offline")
    key = env.get("OPENAI_API_KEY")
    if offline or (not key and not base_url):
        why = "--offline" if offline else "no OPENAI_API_KEY and no --base-url"
        return ChosenModel(OfflineChatModel(), OFFLINE_LABEL, True, "offline", why)
    try:
        from langchain_openai import ChatOpenAI
    except ImportError as e:  # pragma: no cover - the openai extra is in the test extra
        raise ImportError(
            'a real model needs langchain-openai: the package\'s "openai" extra '
            '(pip install ".[openai]" in its checkout)'
        ) from e
    name = model or DEFAULT_MODEL
    kwargs: dict[str, Any] = {"model": name, "api_key": key or "not-needed"}
    if base_url:
        kwargs["base_url"] = base_url
    chat_model = ChatOpenAI(**kwargs)
    # without base_url the client reads OPENAI_BASE_URL: name the server it really talks to
    url = base_url or str(chat_model.root_client.base_url).rstrip("/")
    endpoint = None if url == _OPENAI_API else url
    where = f"at {endpoint}" if endpoint else "on the OpenAI API"
    why = "--base-url" if base_url else "OPENAI_API_KEY is set"
    return ChosenModel(chat_model, f"{name} {where}", False, name, why, endpoint)
