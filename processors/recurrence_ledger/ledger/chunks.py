"""Lists of the state that grow with a revision's history, kept in chunks
(state format 3, ``state.STATE_FORMAT``).

A revision that keeps failing gathers thousands of runs and review
candidates (contract §8, §18). Kept as one list record each, its avoided
positions, its run names with a candidate and its artifact's candidate ids
were rewritten whole — the whole list to the changelog — whenever one entry
was added. Here each list is a head record plus chunk records of at most
``CHUNK`` entries, so adding an entry rewrites one chunk, and the head only
when a chunk is added:

- an **appended list** (:func:`append`, :func:`entries`), in insertion
  order: the head ``{"chunks": n, "open": [...]}`` holds the open chunk and
  the number of full ones, full chunk ``k`` is record ``(chunk, *parts[1:],
  k)``;
- a **sorted set of ints** (:func:`insert`, :func:`before`,
  :func:`values`): the head ``{"firsts": [...], "ids":
  [...], "next": n}`` holds the smallest value and the record id of each
  chunk, in order; chunk ``ids[i]`` is record ``(chunk, *parts[1:],
  ids[i])``, sorted, its values from ``firsts[i]`` up to the next chunk's.

Both read a plain list at the head key (format 2) as it is, and split it
into chunks when it next grows. Functions of the store (``state.Store``),
pure and synchronous like the rest of the core.
"""

from __future__ import annotations

import bisect
from typing import Any

from recurrence_ledger.ledger.state import Store

#: Entries per chunk (a sorted set's chunk holds up to this many before it is split).
CHUNK = 256


def _chunk_key(chunk: str, parts: tuple, number: int) -> tuple:
    return (chunk, *parts[1:], number)


def _write_chunks(store: Store, chunk: str, parts: tuple, items: list) -> list[list]:
    """``items`` (a format-2 plain list) written as chunks ``0, 1, …`` of
    ``CHUNK`` entries, the last possibly shorter; the chunks, in order."""
    pieces = [items[start:start + CHUNK] for start in range(0, len(items), CHUNK)]
    for number, piece in enumerate(pieces):
        store[_chunk_key(chunk, parts, number)] = piece
    return pieces


# -- appended lists ------------------------------------------------------------
def append(store: Store, value: Any, chunk: str, *parts: object) -> None:
    """Append ``value`` to the list at key ``parts`` whose full chunks are
    ``chunk`` records (module docstring). Writes the head, and a full chunk
    when the open one is full; a format-2 plain list is first split."""
    head = store.get(parts)
    if head is None:
        head = {"chunks": 0, "open": []}
    elif isinstance(head, list):
        full = len(head) // CHUNK * CHUNK
        head = {"chunks": len(_write_chunks(store, chunk, parts, head[:full])), "open": head[full:]}
    if len(head["open"]) >= CHUNK:
        store[_chunk_key(chunk, parts, head["chunks"])] = head["open"]
        head = {"chunks": head["chunks"] + 1, "open": []}
    head["open"].append(value)
    store[parts] = head


def entries(store: Store, chunk: str, *parts: object) -> list:
    """Every entry of the appended list at key ``parts``, in append order
    ([] when there is none)."""
    head = store.get(parts)
    if head is None or isinstance(head, list):
        return head or []
    found: list = []
    for number in range(head["chunks"]):
        found += store[_chunk_key(chunk, parts, number)]
    return found + head["open"]


# -- sorted sets of ints ---------------------------------------------------------
def _sorted_head(store: Store, chunk: str, parts: tuple) -> dict | None:
    """The head of the sorted set at ``parts``, a format-2 plain list split
    into chunks first (and written)."""
    head = store.get(parts)
    if isinstance(head, list):
        if not head:
            return None
        pieces = _write_chunks(store, chunk, parts, head)
        head = {"firsts": [piece[0] for piece in pieces], "ids": list(range(len(pieces))), "next": len(pieces)}
        store[parts] = head
    return head


def _locate(head: dict, value: int) -> int:
    """The index of the chunk ``value`` falls in (the first for a value
    below every chunk's)."""
    return max(0, bisect.bisect_right(head["firsts"], value) - 1)


def insert(store: Store, value: int, chunk: str, *parts: object) -> bool:
    """Add ``value`` to the sorted set at key ``parts`` (module docstring):
    True when it was added, False when it was there already (nothing is
    written then). Writes its chunk, and the head when a chunk starts or
    the first value changes."""
    head = _sorted_head(store, chunk, parts)
    if head is None:
        store[_chunk_key(chunk, parts, 0)] = [value]
        store[parts] = {"firsts": [value], "ids": [0], "next": 1}
        return True
    index = _locate(head, value)
    key = _chunk_key(chunk, parts, head["ids"][index])
    values = store[key]
    at = bisect.bisect_left(values, value)
    if at < len(values) and values[at] == value:
        return False
    values.insert(at, value)
    changed = values[0] != head["firsts"][index]
    head["firsts"][index] = values[0]
    if len(values) > CHUNK:  # split: an append starts a chunk of its own, an insert halves the chunk
        cut = len(values) - 1 if at == len(values) - 1 else len(values) // 2
        values, rest = values[:cut], values[cut:]
        head["firsts"].insert(index + 1, rest[0])
        head["ids"].insert(index + 1, head["next"])
        store[_chunk_key(chunk, parts, head["next"])] = rest
        head["next"] += 1
        changed = True
    store[key] = values
    if changed:
        store[parts] = head
    return True


def before(store: Store, value: int, chunk: str, *parts: object) -> int | None:
    """The greatest value of the sorted set at ``parts`` below ``value``, or
    None when there is none."""
    head = store.get(parts)
    if head is None or isinstance(head, list):
        values = head or []
        at = bisect.bisect_left(values, value)
        return values[at - 1] if at else None
    index = _locate(head, value)
    values = store[_chunk_key(chunk, parts, head["ids"][index])]
    at = bisect.bisect_left(values, value)
    if at:
        return values[at - 1]
    return store[_chunk_key(chunk, parts, head["ids"][index - 1])][-1] if index else None


def values(store: Store, chunk: str, *parts: object) -> list[int]:
    """Every value of the sorted set at ``parts``, in order ([] when none)."""
    head = store.get(parts)
    if head is None or isinstance(head, list):
        return list(head or ())
    found: list[int] = []
    for number in head["ids"]:
        found += store[_chunk_key(chunk, parts, number)]
    return found
