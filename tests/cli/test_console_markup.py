"""No user-supplied or bracketed text goes through rich console markup in
the CLI (which would eat ``[reviewers]``, ``[red]`` or any ``[word]`` of a
file name, scope id or error message): every console of the package is
made without markup (``recurrence_ledger.embedded.stdout_console`` /
``stderr_console``), every progress-bar column that formats a value
renders it without markup, and every command's and option's help shows
its brackets."""

from __future__ import annotations

import ast
from pathlib import Path

import typer.main
from rich.text import Text

from recurrence_ledger.cli.main import app
from tests.conftest import REPO
from tests.plugins.processes import run_cli

PACKAGE = REPO / "processors" / "recurrence_ledger"


def calls(name: str) -> list[tuple[Path, ast.Call]]:
    """Every call of ``name`` (``Console(…)``, ``TextColumn(…)``) in the package's source."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == name:
                found.append((path, node))
    return found


def markup_off(call: ast.Call) -> bool:
    return any(keyword.arg == "markup" and isinstance(keyword.value, ast.Constant) and keyword.value.value is False for keyword in call.keywords)


def test_an_error_about_the_reviewer_tokens_file_keeps_its_brackets(tmp_path):
    tokens = tmp_path / "reviewers.toml"
    tokens.write_text('[people]\nalice = "alice-token-0123456789"\n')
    result = run_cli("serve", "--reviewer-tokens", tokens, "--bootstrap", "127.0.0.1:1", env={"REDIS_URL": "redis://127.0.0.1:1/0"}, columns=400)
    assert result.returncode == 2
    assert f"error: the reviewer tokens file {tokens} holds one table [reviewers] of reviewer name = \"token\" lines, with at least one" in result.stderr


def test_every_console_and_progress_column_of_the_package_renders_without_markup():
    consoles = calls("Console")
    assert consoles and [f"{path}:{call.lineno}" for path, call in consoles if not markup_off(call)] == []
    columns = calls("TextColumn")
    assert columns and [f"{path}:{call.lineno}" for path, call in columns if not markup_off(call)] == []


def test_every_help_text_shows_its_brackets():
    def walk(command, path):
        yield path, command
        for name, sub in getattr(command, "commands", {}).items():
            yield from walk(sub, [*path, name])

    eaten = []
    for path, command in walk(typer.main.get_command(app), ["recurrence-ledger"]):
        for name, text in [("help", command.help or "")] + [(param.name, getattr(param, "help", None) or "") for param in command.params]:
            # Rendered as rich markup (Typer's rich mode), the text must lose nothing but its escapes.
            if Text.from_markup(text).plain != text.replace("\\[", "["):
                eaten.append((" ".join(path), name))
    assert eaten == []
