"""The ``recurrence-ledger`` command line: the Typer app and its commands.

One module per command group: ``run`` (run-journal, run, worker),
``records`` (publish, export), ``replay`` (replay, rebuild), ``whatif``
(what-if), ``explain``,
``ops`` (serve, rank, stats), ``simulate``, ``topics``, ``view``, ``review`` and
``holdout`` (the sub-command groups); the options more than one command takes are defined once in
``options``, the clients they open (Kafka, Schema Registry, Redis) in
``clients``. ``recurrence_ledger.cli:app`` is the console entry point and
``python -m recurrence_ledger.cli`` runs it.

Help texts are plain text (Typer's rich markup mode, no Markdown or RST
markup): a command's docstring is its help, its first paragraph one short
line (the commands list shows it), its later paragraphs reflowed to the
terminal's width by :func:`reflow_help` (docstring line breaks are not
kept).
"""

from __future__ import annotations

import inspect
import sys
from typing import Annotated

import typer
from rich.markup import escape
from typer.core import TyperCommand, TyperGroup

from recurrence_ledger.cli import explain, ops, records, replay, run, simulate, whatif
from recurrence_ledger.cli.holdout import holdout_app
from recurrence_ledger.cli.patterns import patterns_app
from recurrence_ledger.cli.review import review_app
from recurrence_ledger.cli.topics import topics_app
from recurrence_ledger.cli.view import view_app

class FlagsAsFlags:
    """Help that shows a flag (``--quiet``, ``--json``,
    ``--static-membership/--dynamic-membership``, ``--help``) as a flag:
    Typer's rich help gives every option a value column, ``<bool>`` for a
    flag, which reads as if the flag took a value. A flag's column stays
    empty (an empty metavar); every option that takes a value keeps its
    type. Mixed into the command and group classes (:func:`flags_as_flags`)."""

    def get_params(self, ctx):  # noqa: ANN001, ANN201 - click's signature
        params = super().get_params(ctx)  # type: ignore[misc]
        for param in params:
            if getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""
        return params


class FlagCommand(FlagsAsFlags, TyperCommand):
    """A command with :class:`FlagsAsFlags` help."""


class FlagGroup(FlagsAsFlags, TyperGroup):
    """A command group with :class:`FlagsAsFlags` help."""


app = typer.Typer(
    cls=FlagGroup,
    add_completion=False, no_args_is_help=True, rich_markup_mode="rich",
    help="recurrence-ledger: did what the agents learned from a failure help?",
    # A traceback must not print local variables: they hold Redis URLs with passwords.
    pretty_exceptions_show_locals=False,
)


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        print(f"recurrence-ledger {version('recurrence-ledger')}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")] = False,
) -> None:
    """recurrence-ledger: did what the agents learned from a failure help?"""


#: The top-level commands, in the order of ``--help``: name and function.
COMMANDS = (
    ("run-journal", run.run_journal_command),
    ("run", run.run_command),
    ("worker", run.worker_command),
    ("publish", records.publish_command),
    ("export", records.export_command),
    ("replay", replay.replay_command),
    ("rebuild", replay.rebuild_command),
    ("what-if", whatif.what_if_command),
    ("explain", explain.explain_command),
    ("explain-effect", explain.explain_effect_command),
    ("serve", ops.serve_command),
    ("rank", ops.rank_command),
    ("stats", ops.stats_command),
    ("simulate", simulate.simulate_command),
)
for _name, _command in COMMANDS:
    app.command(_name)(_command)
app.add_typer(topics_app, name="topics")
app.add_typer(view_app, name="view")
app.add_typer(review_app, name="review")
app.add_typer(holdout_app, name="holdout")
app.add_typer(patterns_app, name="patterns")


def reflow_help(typer_app: typer.Typer, escaped: set[int] | None = None) -> None:
    """Give every command of ``typer_app`` (and of its sub-apps) its
    docstring as help text with each paragraph on one line, so that the
    terminal wraps it at its width instead of at the docstring's line
    breaks (Typer's rich mode keeps single line breaks), its rich markup
    escaped (``escaped``: the ids of the commands done), so that bracketed
    text is shown, not eaten as markup. (An option's help is written
    escaped where it is defined: Typer builds its option infos anew from
    the annotations each time.)"""
    escaped = set() if escaped is None else escaped
    for info in typer_app.registered_commands:
        if info.help is None and info.callback is not None and info.callback.__doc__:
            info.help = "\n\n".join(" ".join(paragraph.split()) for paragraph in inspect.cleandoc(info.callback.__doc__).split("\n\n"))
        if info.help is not None and id(info) not in escaped:
            escaped.add(id(info))
            info.help = escape(info.help)
    for group in typer_app.registered_groups:
        reflow_help(group.typer_instance, escaped)


def flags_as_flags(typer_app: typer.Typer) -> None:
    """Give every command and group of ``typer_app`` (and of its sub-apps)
    :class:`FlagsAsFlags` help."""
    for info in typer_app.registered_commands:
        if info.cls in (None, TyperCommand):
            info.cls = FlagCommand
    for group in typer_app.registered_groups:
        if not (isinstance(group.typer_instance.info.cls, type) and issubclass(group.typer_instance.info.cls, FlagGroup)):
            group.typer_instance.info.cls = FlagGroup
        flags_as_flags(group.typer_instance)


reflow_help(app)
flags_as_flags(app)


def main() -> None:  # pragma: no cover - console entry point
    """Console entry point."""
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
