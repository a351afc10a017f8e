"""The project's exception base class.

Every exception type that recurrence-ledger defines derives from
:class:`RecurrenceLedgerError`, so a caller embedding the package can catch
the project's errors without catching unrelated ones. Each subsystem keeps
its own exception types next to its code (the core's in
``recurrence_ledger.ledger``, the runtime's in ``recurrence_ledger.runtime``);
this module imports nothing and may be imported by the pure core.
"""

from __future__ import annotations


class RecurrenceLedgerError(Exception):
    """Base class of every exception type defined by recurrence-ledger."""
