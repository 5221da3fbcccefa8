"""Pure functions on lists of messages (no database): token counts (`counting`, with the rules
for one message in `per_message` and tiktoken's encodings in `encodings`), safe window starts
(`windows`) and the check of a list of messages (`checks`).
"""

from .counting import EncodingUnavailableError, count_tokens, resolve_message_counter
from .windows import drop_leading_orphans

__all__ = [
    "EncodingUnavailableError",
    "count_tokens",
    "drop_leading_orphans",
    "resolve_message_counter",
]
