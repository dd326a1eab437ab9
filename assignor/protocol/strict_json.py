"""JSON as signed records need it: bounded, strict parsing and the canonical bytes a signature covers."""

from __future__ import annotations

import json
from typing import Any

from assignor.protocol.bounded import OutOfBounds, json_int, shown

MAX_RECORD_BYTES = 1 << 20
MAX_DEPTH = 32
_QUOTE, _BACKSLASH, _OPENERS, _CLOSERS = 0x22, 0x5C, frozenset(b"[{"), frozenset(b"]}")


class MalformedJson(ValueError):
    """Bytes that are not one strict, bounded JSON value; the message says what is wrong."""


def nesting_depth(value: bytes) -> int:
    """The deepest bracket nesting outside strings, found without parsing (so hostile depth costs nothing)."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in value:
        if in_string:
            if escaped:
                escaped = False
            elif byte == _BACKSLASH:
                escaped = True
            elif byte == _QUOTE:
                in_string = False
        elif byte == _QUOTE:
            in_string = True
        elif byte in _OPENERS:
            depth += 1
            deepest = max(deepest, depth)
        elif byte in _CLOSERS:
            depth -= 1
    return deepest


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, item in pairs:
        if key in found:
            raise MalformedJson(f"duplicate key {key!r}")
        found[key] = item
    return found


def _integer(text: str) -> int:
    try:
        return json_int(text)  # its length is checked before int() converts it
    except OutOfBounds:
        raise MalformedJson(f"integer {shown(text)} is outside the signed 64-bit range") from None


def _no_float(text: str) -> float:
    raise MalformedJson(f"number {text[:24]} is not an integer")


def _no_constant(text: str) -> float:
    raise MalformedJson(f"{text} is not JSON")


def _check_strings(value: Any) -> None:
    """Lone surrogates parse in Python but have no UTF-8 form: the canonical bytes would not exist."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise MalformedJson("a string holds a lone UTF-16 surrogate") from None
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def strict_loads(value: bytes, *, max_bytes: int = MAX_RECORD_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """One JSON value from strict UTF-8: bounded size and depth, integers only (int64), no duplicate keys."""
    if len(value) > max_bytes:
        raise MalformedJson(f"{len(value)} bytes, more than the {max_bytes} allowed")
    depth = nesting_depth(value)
    if depth > max_depth:
        raise MalformedJson(f"nested {depth} levels deep, more than the {max_depth} allowed")
    if value.startswith(b"\xef\xbb\xbf"):
        raise MalformedJson("starts with a byte-order mark")
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError as err:
        raise MalformedJson(f"not UTF-8 ({err.reason} at byte {err.start})") from None
    try:
        parsed = json.loads(
            text,
            object_pairs_hook=_no_duplicates,
            parse_int=_integer,
            parse_float=_no_float,
            parse_constant=_no_constant,
        )
    except json.JSONDecodeError as err:
        raise MalformedJson(f"not JSON ({err.msg} at char {err.pos})") from None
    except RecursionError:
        raise MalformedJson("nested too deeply") from None
    _check_strings(parsed)
    return parsed


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no spaces, UTF-8 (docs/formats.md): the bytes signatures and digests cover."""
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise MalformedJson("a string holds a lone UTF-16 surrogate") from None
