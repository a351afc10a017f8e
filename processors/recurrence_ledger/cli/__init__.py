"""The ``recurrence-ledger`` command: one module per command group."""

from recurrence_ledger.cli.main import app

__all__ = ["app"]
