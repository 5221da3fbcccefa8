"""`langmem-sqlite chat`: a terminal agent whose memory lives in SQL.

* [`build_chat_graph`][langmem_sqlite.chat.build_chat_graph] -- the LangGraph graph (checkpointer,
  context policy, user facts).
* [`ChatSession`][langmem_sqlite.chat.ChatSession] -- one user's session: send turns, read summary,
  history and facts.
* [`OfflineChatModel`][langmem_sqlite.chat.OfflineChatModel] -- the rule-based stand-in used without
  an API key (not an LLM).
* [`choose_model`][langmem_sqlite.chat.choose_model] -- `ChatOpenAI`, an OpenAI-compatible server,
  or the offline model.
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
