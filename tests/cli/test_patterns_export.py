"""``recurrence-ledger patterns export --group G --format skill``: the team
skill document of contract §23.6 — a group's patterns at or above the
threshold, their scopes and each scope's current lesson — naming no scope
of another group."""

from __future__ import annotations

import json

from recurrence_ledger.ledger.skill import current_lessons, skill_document
from tests.conftest import CASES
from tests.plugins.processes import run_cli

JOURNAL = CASES / "patterns.jsonl"
OTHERS = ("teamB/", "solo")


def test_the_skill_document_of_a_group_lists_its_patterns_scopes_and_lessons(tmp_path):
    out = tmp_path / "teamA.md"
    result = run_cli("patterns", "export", "--group", "teamA", "--format", "skill", "--pattern-group-separator", "/",
                     "--journal", JOURNAL, "--out", out)
    assert result.returncode == 0, result.stderr
    document = out.read_text(encoding="utf-8")
    assert document.startswith('# Team skill: recurring failures of pattern group "teamA"\n')
    assert "1 pattern.\n\n## schema migration lock timeout\n\nRecurred 4 times in 3 scopes: `teamA/svc1`, `teamA/svc2`, `teamA/svc3`.\n" in document
    assert "### `teamA/svc2`\n\n- **Situation:** a deploy of teamA/svc2 runs its migrations\n- **Action:** terminate the idle session first\n" \
           "- **Lesson:** look for idle sessions before migrating (teamA/svc2)\n- *From:* `M1` revision 1\n" in document
    assert "flaky dns mirror" not in document  # one scope only: below the threshold
    assert not any(other in document for other in OTHERS)


def test_a_group_below_the_threshold_exports_no_pattern_and_names_no_other_group():
    result = run_cli("patterns", "export", "--group", "teamB", "--pattern-group-separator", "/", "--journal", JOURNAL)
    assert result.returncode == 0, result.stderr
    assert "0 patterns." in result.stdout and "##" not in result.stdout
    assert "teamA" not in result.stdout and "solo" not in result.stdout
    unknown = run_cli("patterns", "export", "--group", "teamC", "--pattern-group-separator", "/", "--journal", JOURNAL)
    assert unknown.returncode == 0 and "0 patterns." in unknown.stdout
    assert not any(name in unknown.stdout + unknown.stderr for name in ("teamA", "teamB", "solo"))


def test_without_a_separator_the_one_group_is_exported_with_every_scope():
    result = run_cli("patterns", "export", "--group", "", "--journal", JOURNAL)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("# Team skill: recurring failures of the deployment's scopes\n")
    assert "Recurred 7 times in 6 scopes: `solo`, `teamA/svc1`, `teamA/svc2`, `teamA/svc3`, `teamB/svc1`, `teamB/svc2`." in result.stdout
    bad = run_cli("patterns", "export", "--group", "", "--format", "pdf", "--journal", JOURNAL)
    assert bad.returncode == 2 and "skill" in bad.stderr


def test_a_scope_s_current_lesson_is_its_head_revision_s():
    events = [json.loads(line)["value"] for line in JOURNAL.read_text().splitlines() if json.loads(line)["topic"] == "experience-revisions"]
    solo = next(e for e in events if e["scope_id"] == "solo" and e["artifact_ref"]["artifact_id"] == "M1")
    newer = json.loads(json.dumps(solo))
    newer["artifact_ref"]["revision"] = 2
    newer["content"]["lesson"] = "drain the\nconnection pool first"
    replaced = json.loads(json.dumps(newer))
    replaced["artifact_ref"]["revision"] = 3
    replaced["content"]["failure"] = None
    lessons = current_lessons([newer, *events], {"solo"})
    assert [lesson["lesson"] for lesson in lessons[("solo", "schema migration lock timeout")]] == ["drain the\nconnection pool first"]
    assert ("teamA/svc1", "schema migration lock timeout") not in lessons  # only the scopes asked for
    row = {"group": "", "signature_key": "schema migration lock timeout", "scope_count": 1, "scopes": ["solo"], "recurred": 1}
    document = skill_document("", 1, [row], lessons)
    assert "- **Lesson:** drain the connection pool first\n- *From:* `M1` revision 2\n" in document
    assert "recurred in at least 1 scope of the deployment's scopes (contract §23), with each scope's current lesson for them. 1 pattern." in document
    assert "No current lesson" in skill_document("", 1, [row], current_lessons([newer, replaced, *events], {"solo"}))
