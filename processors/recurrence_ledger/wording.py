"""Counted nouns in the words the CLI, the reports and the documents print."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and ``noun``, the noun in the plural (``plural``, or
    ``noun`` + "s") unless ``count`` is 1: "1 review candidate", "2 review
    candidates", "0 passes" (``counted(0, "pass", "passes")``)."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
