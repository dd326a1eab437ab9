"""Bounded integers from outside input: the text's form and length are checked before ``int()`` converts it, and
the value's range after, so a hostile number (thousands of digits, beyond its column) is refused with a reason
instead of costing quadratic time or failing later where one bad record would fail everyone's run."""

from __future__ import annotations

import re
from typing import Final

INT32_MIN: Final = -(1 << 31)
INT32_MAX: Final = (1 << 31) - 1
INT64_MIN: Final = -(1 << 63)
INT64_MAX: Final = (1 << 63) - 1
# Kafka's TaskId is two int32s: a subtopology (topic group) and a partition, neither negative.
SUBTOPOLOGY_RANGE: Final = (0, INT32_MAX)
PARTITION_RANGE: Final = (0, INT32_MAX)

# ASCII digits only: int() also takes "1_000", " 7", "+7" and other scripts' digits, which no record of ours writes.
_DECIMAL = re.compile(r"-?(?:0|[1-9][0-9]*)")
_SHOWN_CHARS = 40


class OutOfBounds(ValueError):
    """An integer (or its text) outside the range its field allows; the message names the field and the range."""


def shown(value: object, limit: int = _SHOWN_CHARS) -> str:
    """``repr`` of a value for an error message, cut to about ``limit`` characters with its full length said."""
    if isinstance(value, str | bytes) and len(value) > limit:
        return f"{value[:limit]!r}... ({len(value)} characters)"
    if isinstance(value, int) and value.bit_length() > 256:  # repr() of a huge int is quadratic, or refused
        return f"a {value.bit_length()}-bit integer"
    text = repr(value)
    return text if len(text) <= limit + 2 else f"{text[:limit]}... ({len(text)} characters)"


def _digits(bound: int) -> int:
    return len(str(abs(bound))) + (bound < 0)


def parse_int(text: object, low: int, high: int, what: str) -> int:
    """The decimal integer ``text`` (canonical: ASCII digits, an optional ``-``, no leading zeros) within
    ``low..high``; OutOfBounds naming ``what`` otherwise. Length and form are checked before conversion."""
    if not isinstance(text, str):
        raise OutOfBounds(f"{what} must be a decimal integer, got {shown(text)}")
    if len(text) > max(_digits(low), _digits(high)) or _DECIMAL.fullmatch(text) is None:
        raise OutOfBounds(f"{what} must be a decimal integer in {low}..{high}, got {shown(text)}")
    return check_int(int(text), low, high, what)


def check_int(value: object, low: int, high: int, what: str) -> int:
    """``value`` when it is an integer (not a boolean) within ``low..high``; OutOfBounds naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise OutOfBounds(f"{what} must be an integer, got {shown(value)}")
    if not low <= value <= high:
        raise OutOfBounds(f"{what} {shown(value)} is outside {low}..{high}")
    return value


def json_int(text: str) -> int:
    """``parse_int`` hook for ``json.loads``: a JSON integer within the signed 64-bit range every column holds."""
    return parse_int(text, INT64_MIN, INT64_MAX, "integer")
