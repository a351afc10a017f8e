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
    PIPE_WIDTH columns otherwise (``COLUMNS`` still wins). Without console
    markup, like every console of the CLI (:func:`stderr_console`): what is
    printed holds user and file text (scope ids, paths, error messages
    quoting a file's ``[table]``), which markup would eat; styles are given
    as ``style=`` or ``rich.text.Text`` spans instead."""
    wide = not sys.stdout.isatty() and "COLUMNS" not in os.environ
    return Console(width=PIPE_WIDTH if wide else None, markup=False)


def stderr_console() -> Console:
    """The CLI's console on stderr (errors, warnings, progress bars),
    without console markup (:func:`stdout_console`)."""
    return Console(stderr=True, markup=False)


def file_progress(show: bool) -> Progress:
    """A transient progress bar on stderr for reading a file by bytes (shared
    by run-journal and publish)."""
    return Progress(
        TextColumn("{task.description}", style="bold", markup=False),  # the description is a file name
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=stderr_console(),
        transient=True,
        disable=not show,
    )
