"""Pure functions on lists of messages (no database): token counting and safe window starts.

* `counting`: exact (tiktoken), approximate or custom token counts, cached per message
  (`per_message` holds the counting rules of one message, `encodings` tiktoken's
  encodings and their offline loading);
* `windows`: where a window of recent messages may start without breaking a tool call;
* `checks`: the check of a list of messages (a `str` is refused, not split).
"""

from .counting import EncodingUnavailableError, count_tokens, resolve_message_counter
from .windows import drop_leading_orphans

__all__ = [
    "EncodingUnavailableError",
    "count_tokens",
    "drop_leading_orphans",
    "resolve_message_counter",
]
