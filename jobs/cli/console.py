"""The console every command prints through: a terminal's own width, and lines as long as they need elsewhere."""

from __future__ import annotations

from typing import IO

from rich.console import Console

# Wide enough that no id, status or table cell is cut when output goes to a pipe, a file or CI (rich assumes 80
# columns there); a terminal keeps its own width and folds.
PIPE_WIDTH = 400


def cli_console(file: IO[str] | None = None) -> Console:
    """A console that never cuts ids: its terminal's width on a terminal, ``PIPE_WIDTH`` without wrapping elsewhere."""
    console = Console(file=file)
    return console if console.is_terminal else Console(file=file, width=PIPE_WIDTH, soft_wrap=True)
