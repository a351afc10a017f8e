"""``python -m recurrence_ledger.cli``: the ``recurrence-ledger`` command."""

from recurrence_ledger.cli.main import app

if __name__ == "__main__":  # not when a worker process of `worker --processes` is spawned
    app()
