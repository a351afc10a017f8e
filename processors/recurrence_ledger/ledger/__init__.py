"""The pure ledger core (contract §3–§8).

Nothing under this package imports Kafka, Faust, Redis, fastavro or does file
I/O; ``tests/ledger/test_purity.py`` enforces it. Entry point:
``recurrence_ledger.ledger.processor.LedgerProcessor``.
"""
