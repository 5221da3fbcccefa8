"""Pure functions on lists of messages (no database): token counting and safe window starts.

* :mod:`.counting`: exact (tiktoken), approximate or custom token counts;
* :mod:`.windows`: where a window of recent messages may start without breaking a tool call.
"""

from .counting import EncodingUnavailableError, count_tokens, resolve_message_counter
from .windows import drop_leading_orphans

__all__ = [
    "EncodingUnavailableError",
    "count_tokens",
    "drop_leading_orphans",
    "resolve_message_counter",
]
