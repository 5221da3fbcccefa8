"""`langmem-sqlite chat`: a terminal agent whose memory lives in SQL: its graph
([`build_chat_graph`][langmem_sqlite.chat.build_chat_graph]), one user's session of it
([`ChatSession`][langmem_sqlite.chat.ChatSession]) and its model
([`choose_model`][langmem_sqlite.chat.choose_model]: `ChatOpenAI`, an OpenAI-compatible server,
or the rule-based [`OfflineChatModel`][langmem_sqlite.chat.OfflineChatModel]).
"""

from .agent import ChatSession, ChatState, build_chat_graph, thread_id_for
from .app import ChosenModel, choose_model, open_chat, run_lines
from .offline import OFFLINE_LABEL, OfflineChatModel

__all__ = [
    "OFFLINE_LABEL",
    "ChatSession",
    "ChatState",
    "ChosenModel",
    "OfflineChatModel",
    "build_chat_graph",
    "choose_model",
    "open_chat",
    "run_lines",
    "thread_id_for",
]
