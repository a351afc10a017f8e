"""``python -m recurrence_ledger.cli``: the ``recurrence-ledger`` command."""

from recurrence_ledger.cli.main import app

app()
