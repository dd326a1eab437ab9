"""How the report spells numbers for people: thousands separators, plural forms, durations, short ids."""

from __future__ import annotations

import math

NOT_COMPUTED = "not computed"
NOT_ESTIMATED = "not estimated"
_SCALES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def count(value: int | float | None) -> str:
    """``1,234,567``; ``-`` for a missing value."""
    if value is None:
        return "-"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.1f}"
    return f"{int(value):,}"


def plural(n: int | float | None, singular: str, plural_form: str | None = None) -> str:
    """``1 move``, ``2 moves``, ``1,200 offsets``; the number is formatted with :func:`count`."""
    if n is None:
        return f"- {plural_form or singular + 's'}"
    word = singular if n == 1 else (plural_form or singular + "s")
    return f"{count(n)} {word}"


def compact(value: int | float | None) -> str:
    """``1.2 M``, ``45.3 k``, ``870``: for cards and charts (the exact figure goes in a title)."""
    if value is None:
        return "-"
    for scale, suffix in _SCALES:
        if abs(value) >= scale:
            return f"{value / scale:,.1f} {suffix}"
    return count(value)


def duration(seconds: float | None) -> str:
    """``45 s``, ``3 min 20 s``, ``2 h 5 min``, ``1 d 3 h``; ``not estimated`` for a missing value."""
    if seconds is None or math.isnan(seconds):
        return NOT_ESTIMATED
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    minutes, sec = divmod(s, 60)
    if minutes < 60:
        return f"{minutes} min" + (f" {sec} s" if sec else "")
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h" + (f" {minutes} min" if minutes else "")
    days, hours = divmod(hours, 24)
    return f"{days} d" + (f" {hours} h" if hours else "")


def ratio(value: float | None) -> str:
    """A load skew: ``0.25``; ``-`` for a missing value."""
    return "-" if value is None else f"{value:.2f}"


def short_id(value: str, keep: int = 18) -> str:
    """A long id cut in the middle (``3f2a…c91e``) so it fits its label; the full id goes in a title."""
    if len(value) <= keep:
        return value
    head = (keep - 1) // 2
    return value[:head] + "…" + value[-(keep - 1 - head) :]


def change(plan: float | None, baseline: float | None) -> str:
    """The plan against a baseline with the direction in words (a bare ``-76%`` beside the baseline's figure reads
    as the baseline being lower): ``plan 53% less``, ``plan 4 more``, ``same``; ``-`` when either is missing."""
    if plan is None or baseline is None:
        return "-"
    if plan == baseline:
        return "same"
    word = "less" if plan < baseline else "more"
    if baseline == 0:
        return f"plan {count(abs(plan - baseline))} {word}"
    return f"plan {abs(plan - baseline) / baseline:.0%} {word}"
