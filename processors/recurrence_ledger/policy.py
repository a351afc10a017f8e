"""The deployment's policy: every tunable the ledger and its runners take,
each defined once with its default, its environment variable, its command
line option and its help text.

A :class:`Setting` is the single definition of one tunable. The core's
:class:`recurrence_ledger.ledger.processor.LedgerConfig` takes its defaults
from here, the CLI builds its options from here (``--review-threshold``
with envvar ``RL_REVIEW_THRESHOLD`` and the help below), the worker and
the view follower take their batching defaults from here, and the docs
table of settings (docs/operating.md) is printed from :data:`SETTINGS`.
Nothing else writes one of these defaults as a literal; a test checks it.

This module is a leaf: it imports nothing of the package, so the pure core
may import it (docs/architecture.md).

Contract sections: the review threshold and the top-N of ``top_revisions``
are §8, the critical review threshold §22, the provenance horizon §5, the near-duplicate threshold and the
pending-candidate bound §12 (which bounds waiting review decisions too,
§18), the effect's minimum and probability and the holdout's salt and
rate §21, the pattern threshold and group separator §23 (docs/contract.md); the commit interval and
batch size are the Kafka runtime's (docs/kafka.md) and never change a
ledger fact; the connection limits are the read API's (``serve``,
docs/operating.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Generic, TypeVar

T = TypeVar("T", int, Fraction, str)

#: The text of an exact fraction setting: a fraction (``4/5``) or a decimal
#: (``0.8``, ``.25``, ``8e-1``) of at most :data:`MAX_FRACTION_TEXT`
#: characters, its exponent two digits at most — so reading it costs
#: microseconds whatever is sent (``Fraction("1e-99999999")`` alone would
#: build a 10⁹⁹⁹⁹⁹⁹⁹-sized integer).
FRACTION_TEXT = re.compile(r"[+-]?(?:\d+/\d+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d{1,2})?)", re.ASCII)
MAX_FRACTION_TEXT = 64


def parse_exact_fraction(text: str) -> Fraction:
    """``text`` (surrounding whitespace ignored) read exactly as a
    :class:`Fraction` — never through a binary double. Raises ValueError
    for anything that is not :data:`FRACTION_TEXT` within
    :data:`MAX_FRACTION_TEXT` characters (``nan``, ``1/0``, ``1e400``,
    ``0x1p-2``), the range being the caller's to check."""
    stripped = text.strip()
    if len(stripped) > MAX_FRACTION_TEXT or FRACTION_TEXT.fullmatch(stripped) is None:
        raise ValueError(f"not a fraction like 1/4 or a decimal like 0.25 (at most {MAX_FRACTION_TEXT} characters): {text[:80]!r}")
    try:
        return Fraction(stripped)
    except ZeroDivisionError:
        raise ValueError(f"a fraction with denominator 0: {stripped!r}") from None


#: The largest count a ledger setting may be: an Avro long (the records
#: carry the thresholds they applied, contract §8, §23).
MAX_COUNT = 2**63 - 1
#: The most processes ``--jobs`` and ``--processes`` start (each a Python
#: process of its own: a few MiB before it reads anything).
MAX_PROCESSES = 1024


@dataclass(frozen=True)
class Setting(Generic[T]):
    """One tunable of the deployment.

    - ``name``: the field name (``LedgerConfig``/``WorkerConfig`` attribute).
    - ``option``: the command line option (``--review-threshold``).
    - ``env``: the environment variable that sets the option's value.
    - ``default``: the value when neither is given.
    - ``minimum``: the smallest accepted value (inclusive).
    - ``unit``: what the number counts, for the docs (``journal positions``).
    - ``section``: the rule in docs/contract.md (``§8``) or the runtime doc.
    - ``help``: one line for ``--help`` and the docs.
    - ``optional``: ``None`` is a value (the provenance horizon: wait until
      the end of the journal; the holdout policy: unset).
    - ``maximum``: the largest accepted value (inclusive), or None.
    """

    name: str
    option: str
    env: str
    default: T | None
    minimum: T
    unit: str
    section: str
    help: str
    optional: bool = False
    maximum: T | None = None

    def check(self, value: T | None) -> None:
        """Raise ValueError when ``value`` is below :attr:`minimum` (``None``
        is accepted only where the setting is :attr:`optional`)."""
        if value is None:
            if not self.optional:
                raise ValueError(f"{self.name} must be set")
            return
        if value < self.minimum:
            raise ValueError(f"{self.name} must be ≥ {self.minimum}, got {value}")
        if self.maximum is not None and value > self.maximum:
            raise ValueError(f"{self.name} must be ≤ {self.maximum}, got {value}")


REVIEW_THRESHOLD: Setting[int] = Setting(
    "review_threshold", "--review-threshold", "RL_REVIEW_THRESHOLD", 3, 1, "consecutive recurred verdicts", "§8",
    "Streak at which a revision needs review (contract §8).",
    maximum=MAX_COUNT,
)
CRITICAL_REVIEW_THRESHOLD: Setting[int] = Setting(
    "critical_review_threshold", "--critical-review-threshold", "RL_CRITICAL_REVIEW_THRESHOLD", 1, 1,
    "consecutive recurred verdicts", "§22",
    "Streak at which a critical revision needs review and publishes its candidate (contract §22).",
    maximum=MAX_COUNT,
)
TOP_REVISIONS: Setting[int] = Setting(
    "top_revisions_limit", "--top-revisions", "RL_TOP_REVISIONS", 10, 0, "rows", "§8",
    "N of top_revisions (contract §8).",
    maximum=MAX_COUNT,
)
PROVENANCE_HORIZON: Setting[int] = Setting(
    "provenance_horizon", "--provenance-horizon", "RL_PROVENANCE_HORIZON", 10_000, 1, "journal positions", "§5",
    "Journal positions a pending outcome may wait (contract §5); end of file always decides.",
    optional=True,
    maximum=MAX_COUNT,
)
MAX_PENDING_CANDIDATES: Setting[int] = Setting(
    "max_pending_candidates", "--max-pending-candidates", "RL_MAX_PENDING_CANDIDATES", 5_000, 1, "candidates per scope", "§12",
    "Admission candidates (and, counted apart, review decisions) one scope may hold waiting; one more is dead-lettered (too_many_pending).",
    maximum=MAX_COUNT,
)
#: Admission rule 5's Sørensen–Dice threshold 0.8, as the exact fraction 4/5:
#: a score is compared as ``5 * 2|A∩B| ≥ 4 * (|A| + |B|)``, never as a float.
NEAR_DUPLICATE_THRESHOLD: Setting[Fraction] = Setting(
    "near_duplicate_threshold", "--near-duplicate-threshold", "RL_NEAR_DUPLICATE_THRESHOLD", Fraction(4, 5), Fraction(0),
    "Sørensen–Dice score of cue bigrams", "§12",
    "Score at which an admission candidate's cue is a near-duplicate of a current head's (contract §12, rule 5).",
)
EFFECT_MIN_RESOLVED: Setting[int] = Setting(
    "effect_min_resolved", "--effect-min-resolved", "RL_EFFECT_MIN_RESOLVED", 5, 1, "resolved observations per arm", "§21",
    "Resolved observations each arm of a revision needs before its effect verdict is more than insufficient (contract §21.4).",
    maximum=MAX_COUNT,
)
#: The probability_helps at which a lesson helps (and 1 − it, harms), exact:
#: compared with the exact posterior probability, never a rounded one.
EFFECT_PROBABILITY: Setting[Fraction] = Setting(
    "effect_probability", "--effect-probability", "RL_EFFECT_PROBABILITY", Fraction(19, 20), Fraction(1, 2),
    "posterior probability", "§21",
    "probability_helps at which a lesson helps; at or below 1 minus it, it harms (contract §21.4).",
    maximum=Fraction(1),
)
HOLDOUT_SALT: Setting[str] = Setting(
    "holdout_salt", "--holdout-salt", "RL_HOLDOUT_SALT", None, "", "text", "§21",
    "Salt of the verified holdout assignment; with the holdout rate, pairs not on their assigned arm are mismatches (contract §21.5).",
    optional=True,
)
HOLDOUT_RATE: Setting[Fraction] = Setting(
    "holdout_rate", "--holdout-rate", "RL_HOLDOUT_RATE", None, Fraction(0), "share of a Handoff's lessons", "§21",
    "Share of lessons the verified assignment withholds, an exact fraction ≤ 1/2; set with the holdout salt (contract §21.5).",
    optional=True, maximum=Fraction(1, 2),
)
PATTERN_THRESHOLD: Setting[int] = Setting(
    "pattern_threshold", "--pattern-threshold", "RL_PATTERN_THRESHOLD", 3, 1, "scopes of a pattern group", "§23",
    "Contributing scopes at which a signature of a pattern group becomes a PatternCandidate (contract §23).",
    maximum=MAX_COUNT,
)
#: A text setting: its minimum is the empty text (any separator passes
#: ``check``); ``LedgerConfig`` refuses an empty separator.
PATTERN_GROUP_SEPARATOR: Setting[str] = Setting(
    "pattern_group_separator", "--pattern-group-separator", "RL_PATTERN_GROUP_SEPARATOR", None, "", "text", "§23",
    "Pattern groups (contract §23): a scope's group is its scope_id up to the first separator; unset, every scope is in the group \"\".",
    optional=True,
)
COMMIT_INTERVAL_MS: Setting[int] = Setting(
    "commit_interval_ms", "--commit-interval-ms", "RL_COMMIT_INTERVAL_MS", 100, 10, "milliseconds", "kafka.md",
    "Longest a transaction stays open; it commits sooner once the input is drained (docs/kafka.md, commits and latency).",
)
MAX_BATCH: Setting[int] = Setting(
    "max_batch", "--max-batch", "RL_MAX_BATCH", 2_000, 1, "records", "kafka.md",
    "Records consumed per poll.",
)
#: ``auto`` in place of a number of processes: the cores this process may
#: use (``os.sched_getaffinity``).
AUTO = "auto"
JOBS: Setting[int] = Setting(
    "jobs", "--jobs", "RL_JOBS", 1, 1, "processes", "journals.md",
    "Processes a journal's scopes are split across (auto: one per usable core); the same files, byte for byte.",
    maximum=MAX_PROCESSES,
)
WORKER_PROCESSES: Setting[int] = Setting(
    "processes", "--processes", "RL_WORKER_PROCESSES", 1, 1, "processes", "kafka.md",
    "Worker processes one supervisor runs in the consumer group (auto: one per usable core).",
    maximum=MAX_PROCESSES,
)

SERVE_LIMIT_CONCURRENCY: Setting[int] = Setting(
    "limit_concurrency", "--limit-concurrency", "RL_SERVE_LIMIT_CONCURRENCY", 256, 1, "connections or requests", "operating.md",
    "Connections (or requests in progress) served at once; a request beyond them gets 503.",
)
SERVE_TIMEOUT_KEEP_ALIVE: Setting[int] = Setting(
    "timeout_keep_alive", "--timeout-keep-alive", "RL_SERVE_TIMEOUT_KEEP_ALIVE", 5, 1, "seconds", "operating.md",
    "Seconds an idle connection stays open between requests (uvicorn's timeout_keep_alive).",
)
SERVE_HEADER_TIMEOUT: Setting[int] = Setting(
    "header_timeout", "--header-timeout", "RL_SERVE_HEADER_TIMEOUT", 10, 1, "seconds", "operating.md",
    "Seconds to send a whole request head once a connection opens or starts its next request, else closed (a slow trickle).",
)
SERVE_MAX_HEADER_BYTES: Setting[int] = Setting(
    "max_header_bytes", "--max-header-bytes", "RL_SERVE_MAX_HEADER_BYTES", 16_384, 1_024, "bytes", "operating.md",
    "Largest request head; a larger one is answered 431 and closed (also h11's max incomplete event size).",
)

#: Journal records per batch of the views (contract §8, §11): the embedded
#: runner's view files get at most one record per changed key every this
#: many records, and at the end of the file (``--view-batch``).
DEFAULT_VIEW_BATCH = 1_000
#: Observations kept per revision history, and points per scope trend, in
#: Redis (recurrence_ledger.read.history; ``--history-limit``, ``--trend-limit``).
DEFAULT_HISTORY_LIMIT = 1000
DEFAULT_TREND_LIMIT = 1000

#: The ledger policy: what decides ledger facts and views (contract §5, §8, §12, §21, §22, §23).
LEDGER_SETTINGS: tuple[Setting, ...] = (
    REVIEW_THRESHOLD, CRITICAL_REVIEW_THRESHOLD, TOP_REVISIONS, PROVENANCE_HORIZON, MAX_PENDING_CANDIDATES, NEAR_DUPLICATE_THRESHOLD,
    EFFECT_MIN_RESOLVED, EFFECT_PROBABILITY, HOLDOUT_SALT, HOLDOUT_RATE,
    PATTERN_THRESHOLD, PATTERN_GROUP_SEPARATOR,
)
#: The runtime's batching: how often and how much, never what.
RUNTIME_SETTINGS: tuple[Setting, ...] = (COMMIT_INTERVAL_MS, MAX_BATCH)
#: How many processes: never what, nor how often.
PROCESS_SETTINGS: tuple[Setting, ...] = (JOBS, WORKER_PROCESSES)
#: The read API's connection limits (``serve``): how many and how long, never what.
SERVE_SETTINGS: tuple[Setting, ...] = (SERVE_LIMIT_CONCURRENCY, SERVE_TIMEOUT_KEEP_ALIVE, SERVE_HEADER_TIMEOUT, SERVE_MAX_HEADER_BYTES)
#: Every setting, in the order of the docs table.
SETTINGS: tuple[Setting, ...] = LEDGER_SETTINGS + RUNTIME_SETTINGS + PROCESS_SETTINGS + SERVE_SETTINGS


def markdown_table() -> str:
    """The docs table of every setting (option, variable, default, unit,
    rule), as Markdown; docs/operating.md carries it and a test keeps the two
    equal."""
    rows = ["| option | environment | default | unit | rule | what |", "| --- | --- | --- | --- | --- | --- |"]
    for setting in SETTINGS:
        default = "unset" if setting.default is None else setting.default
        rows.append(f"| `{setting.option}` | `{setting.env}` | {default} | {setting.unit} | {setting.section} | {setting.help} |")
    return "\n".join(rows) + "\n"
