"""Pure functions on lists of messages (no database): token counting and safe window starts.

* :mod:`.counting`: exact (tiktoken), approximate or custom token counts, cached per message
  (:mod:`.per_message` holds the counting rules of one message, :mod:`.encodings` tiktoken's
  encodings and their offline loading);
* :mod:`.windows`: where a window of recent messages may start without breaking a tool call;
* :mod:`.checks`: the check of a list of messages (a ``str`` is refused, not split).
"""

from .counting import EncodingUnavailableError, count_tokens, resolve_message_counter
from .windows import drop_leading_orphans

__all__ = [
    "EncodingUnavailableError",
    "count_tokens",
    "drop_leading_orphans",
    "resolve_message_counter",
]
