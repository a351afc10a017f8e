"""contract §11: the embedded runner — a journal file in, one JSON Lines file
per output topic out, through the same core as the Kafka worker.

Three modules: :mod:`.runner` (``run_journal``, ``journal_ledger``, the
files out and the run's summary), :mod:`.journal` (the journal-file reader)
and :mod:`.output` (the terminal: the reports' console, the progress bar).
Their public names are importable from here too, imported when first
asked for (PEP 562): importing ``recurrence_ledger.embedded.output`` (the
CLI's consoles) does not import the ledger core.
"""

from importlib import import_module

#: Each public name and the module that defines it.
EXPORTS = {
    "journal_lines": "journal",
    "PIPE_WIDTH": "output", "file_progress": "output", "stdout_console": "output",
    "DEFAULT_VIEW_BATCH": "runner", "JsonlSink": "runner", "RunSummary": "runner", "close_batch": "runner", "journal_ledger": "runner",
    "run_journal": "runner",
}

__all__ = sorted(EXPORTS)


def __getattr__(name: str):  # noqa: ANN202 - PEP 562
    """The public name ``name`` from its module (AttributeError for any other)."""
    if name not in EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{EXPORTS[name]}"), name)
