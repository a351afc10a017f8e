"""The version of the key layout a namespace holds (``recurrence_ledger.read.keys``).

Layout 2 (Redis Cluster hash tags) replaced layout 1 (the same keys without
hash tags, on a single Redis). The view is rebuildable, so the upgrade is
``recurrence-ledger view rebuild`` (docs/upgrading.md): it deletes layout
1's keys with the view's and writes layout 2, with its marker
(``{ns}:{<ns>}:layout``). A follower checks the layout before its first
write (:func:`check_layout`) and refuses, saying so, to write beside layout
1's keys or into a layout it does not know.
"""

from __future__ import annotations

from recurrence_ledger.errors import RecurrenceLedgerError
from recurrence_ledger.read.keys import LAYOUT_VERSION, Keys


class LayoutError(RecurrenceLedgerError):
    """The namespace holds keys of another layout than this version's; the
    message says what to run."""


def check_layout(client, keys: Keys) -> None:  # noqa: ANN001 - a redis-py client (single Redis or cluster)
    """Check that ``keys``' namespace holds layout :data:`LAYOUT_VERSION`
    (or nothing, then mark it so). Raises :class:`LayoutError` when it
    holds layout 1's keys (``{ns}:scopes``) or another version's marker,
    and redis errors. Two commands on two slots (not one transaction)."""
    pipe = client.pipeline(transaction=False)
    pipe.get(keys.layout_marker)
    pipe.exists(keys.legacy_scopes)
    marker, legacy = pipe.execute()
    if legacy:
        raise LayoutError(
            f"the Redis view {keys.namespace} holds keys of layout 1 (written before Redis Cluster support; "
            f"this version writes layout {LAYOUT_VERSION}): run `recurrence-ledger view rebuild` once to rewrite it "
            "(docs/upgrading.md); nothing was written"
        )
    if marker is None:
        client.set(keys.layout_marker, LAYOUT_VERSION, nx=True)
        return
    found = marker.decode() if isinstance(marker, bytes) else str(marker)
    if found != str(LAYOUT_VERSION):
        raise LayoutError(
            f"the Redis view {keys.namespace} is in key layout {found}, this version writes layout {LAYOUT_VERSION}: "
            "run this version's `recurrence-ledger view rebuild` (docs/upgrading.md); nothing was written"
        )


def mark_layout(client, keys: Keys) -> None:  # noqa: ANN001
    """Record that ``keys``' namespace holds layout :data:`LAYOUT_VERSION`
    (after a rebuild wrote it). Raises redis errors."""
    client.set(keys.layout_marker, LAYOUT_VERSION)
