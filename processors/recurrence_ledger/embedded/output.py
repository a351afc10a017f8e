"""The terminal output of the command-line runs: the console of the
reports and the progress bar of reading a file."""

from __future__ import annotations

import os
import sys

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

#: Width of tables written to a pipe or file (rich's default there is 80
#: columns, which folds scope ids and signatures mid-word).
PIPE_WIDTH = 200


def stdout_console() -> Console:
    """The console of the CLI's reports: the terminal's width on a TTY,
    PIPE_WIDTH columns otherwise (``COLUMNS`` still wins)."""
    wide = not sys.stdout.isatty() and "COLUMNS" not in os.environ
    return Console(width=PIPE_WIDTH if wide else None)


def file_progress(show: bool) -> Progress:
    """A transient progress bar on stderr for reading a file by bytes (shared
    by run-journal and publish)."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
        disable=not show,
    )
