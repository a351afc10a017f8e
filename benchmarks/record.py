"""Writing measured numbers into BENCHMARKS.md: each benchmark owns one
block between ``<!-- NAME:begin -->`` and ``<!-- NAME:end -->`` markers."""

from __future__ import annotations

from pathlib import Path

BENCHMARKS_MD = Path(__file__).resolve().parents[1] / "BENCHMARKS.md"


def markers(name: str) -> tuple[str, str]:
    """The begin/end markers of block ``name``."""
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


def write_block(name: str, heading: str, lines: list[str]) -> None:
    """Replace block ``name`` (the lines between its markers) in
    BENCHMARKS.md, or append it under ``## heading`` when it is new."""
    begin, end = markers(name)
    block = "\n".join([begin, *lines, end])
    text = BENCHMARKS_MD.read_text() if BENCHMARKS_MD.exists() else "# Benchmarks\n\n"
    if begin in text:
        head, rest = text.split(begin, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + f"\n\n## {heading}\n\n" + block + "\n"
    BENCHMARKS_MD.write_text(text)
