"""Argument types for numbers and ids given on the command line: bounded before conversion, refused with a reason
(argparse then exits 2 naming the flag)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from assignor.protocol.bounded import INT32_MAX, INT64_MAX, OutOfBounds, parse_int
from assignor.task import TaskId


def bounded_int(low: int, high: int) -> Callable[[str], int]:
    """An argparse ``type``: a decimal integer within ``low..high``."""

    def parse(text: str) -> int:
        try:
            return parse_int(text, low, high, "the value")
        except OutOfBounds as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    parse.__name__ = f"integer {low}..{high}"  # argparse names the type in its own errors
    return parse


def task_id(text: str) -> str:
    """An argparse ``type``: a task id ``<subtopology>_<partition>``, kept as its text."""
    try:
        return str(TaskId.parse(text))
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


PORT = bounded_int(0, 65_535)
COUNT = bounded_int(1, INT32_MAX)
MILLIS = bounded_int(1, INT64_MAX)
VERSION = bounded_int(0, INT64_MAX)
