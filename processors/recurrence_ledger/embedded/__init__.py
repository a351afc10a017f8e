"""contract §11: the embedded runner — a journal file in, one JSON Lines file
per output topic out, through the same core as the Kafka worker.

Three modules: :mod:`.runner` (``run_journal``, ``journal_ledger``, the
files out and the run's summary), :mod:`.journal` (the journal-file reader)
and :mod:`.output` (the terminal: the reports' console, the progress bar).
Their public names are importable from here too.
"""

from recurrence_ledger.embedded.journal import journal_lines
from recurrence_ledger.embedded.output import PIPE_WIDTH, file_progress, stdout_console
from recurrence_ledger.embedded.runner import DEFAULT_VIEW_BATCH, JsonlSink, RunSummary, close_batch, journal_ledger, run_journal

__all__ = [
    "DEFAULT_VIEW_BATCH", "PIPE_WIDTH", "JsonlSink", "RunSummary", "close_batch", "file_progress", "journal_ledger", "journal_lines",
    "run_journal", "stdout_console",
]
