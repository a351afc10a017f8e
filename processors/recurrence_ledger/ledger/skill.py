"""contract §23.6: a pattern group's team skill document — per pattern at
or above the pattern threshold, the signature, its scopes and each scope's
current lesson for it (situation, action, lesson), as one Markdown text.

Pure: the caller gives the group's SignaturePattern rows (the view's final
values) and the Experience revisions it knows; nothing of another group is
read or named (§23.1), so the document of group G names only G's scopes.
"""

from __future__ import annotations

from collections.abc import Iterable

from recurrence_ledger.ledger.normalize import canonical_json, collapse_white_space, normalize
from recurrence_ledger.ledger.patterns import pattern_rank
from recurrence_ledger.wording import counted


def current_lessons(experiences: Iterable[dict], scopes: set[str]) -> dict[tuple[str, str], list[dict]]:
    """The current lessons of ``scopes`` per (scope_id, signature_key):
    for each artifact of a scope, its current head — the highest revision
    known (the first version of a revision stands, contract §3) — when it
    carries a failure record; its signature_key is the normalized recall
    cue (§4). ``experiences``: Experience revision events (contract §3, as
    validated JSON), in any order; those of other scopes are skipped.
    Returns lists of ``{artifact_id, revision, situation, action, lesson}``
    in artifact_id order."""
    heads: dict[tuple[str, str], dict] = {}
    for event in experiences:
        scope_id = event["scope_id"]
        if scope_id not in scopes:
            continue
        ref = event["artifact_ref"]
        key = (scope_id, ref["artifact_id"])
        current = heads.get(key)
        if current is None or ref["revision"] > current["artifact_ref"]["revision"]:
            heads[key] = event
    lessons: dict[tuple[str, str], list[dict]] = {}
    for (scope_id, artifact_id), event in sorted(heads.items()):
        failure = event["content"]["failure"]
        if failure is None:
            continue
        content = event["content"]
        signature_key = normalize(failure["signature"]["recall_cue"])
        lessons.setdefault((scope_id, signature_key), []).append({
            "artifact_id": artifact_id,
            "revision": event["artifact_ref"]["revision"],
            "situation": content["situation"],
            "action": content["action"],
            "lesson": content["lesson"],
        })
    return lessons


def _text(value: str) -> str:
    """One line of Markdown text: white space collapsed (a lesson's line
    breaks would end its list item)."""
    return collapse_white_space(value).strip()


def _group_name(group: str) -> str:
    return "the deployment's scopes" if group == "" else f"pattern group {canonical_json(group).decode('utf-8')}"


def skill_document(group: str, threshold: int, rows: Iterable[dict], lessons: dict[tuple[str, str], list[dict]]) -> str:
    """The Markdown skill document of ``group`` (contract §23.6): every
    SignaturePattern row of the group whose scope_count ≥ ``threshold``,
    most scopes first (then signature_key), each with its scopes (the
    row's first 100) and each scope's current lessons for the signature
    (:func:`current_lessons`); rows of other groups are ignored. Ends with
    a newline."""
    patterns = sorted((row for row in rows if row["group"] == group and row["scope_count"] >= threshold), key=pattern_rank)
    lines = [
        f"# Team skill: recurring failures of {_group_name(group)}",
        "",
        f"Signatures that recurred in at least {counted(threshold, 'scope')} of {_group_name(group)} (contract §23), "
        f"with each scope's current lesson for them. {counted(len(patterns), 'pattern')}.",
    ]
    for row in patterns:
        shown = f" (the first {len(row['scopes'])})" if len(row["scopes"]) < row["scope_count"] else ""
        lines += [
            "",
            f"## {_text(row['signature_key'])}",
            "",
            f"Recurred {row['recurred']} times in {row['scope_count']} scopes{shown}: {', '.join(f'`{scope}`' for scope in row['scopes'])}.",
        ]
        for scope_id in row["scopes"]:
            lines += ["", f"### `{scope_id}`", ""]
            found = lessons.get((scope_id, row["signature_key"]), [])
            if not found:
                lines.append("No current lesson carries this signature (its revision was replaced or withdrawn).")
            for lesson in found:
                lines += [
                    f"- **Situation:** {_text(lesson['situation'])}",
                    f"- **Action:** {_text(lesson['action'])}",
                    f"- **Lesson:** {_text(lesson['lesson'])}",
                    f"- *From:* `{lesson['artifact_id']}` revision {lesson['revision']}",
                ]
    return "\n".join(lines) + "\n"
