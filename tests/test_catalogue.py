"""The topic catalogue as data: topics/catalogue.toml is the one place a
topic is written down; the module's names, the docs' table and the shipped
package data come from it, and a broken file is refused with a clear error."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from recurrence_ledger import catalogue
from recurrence_ledger.catalogue import CatalogueError, load
from recurrence_ledger.errors import RecurrenceLedgerError

REPO = Path(__file__).resolve().parents[1]
GOOD = (REPO / "topics" / "catalogue.toml").read_text(encoding="utf-8")


def test_the_contract_holds_the_generated_topic_table_verbatim():
    assert catalogue.markdown_table() in (REPO / "docs" / "contract.md").read_text(encoding="utf-8")


def test_every_topic_of_the_file_has_its_python_name():
    for spec in catalogue.CATALOGUE:
        assert getattr(catalogue, spec.constant) == spec.name


def test_the_package_reads_the_repository_file_through_its_link():
    link = REPO / "processors" / "recurrence_ledger" / "topics"
    assert link.is_symlink() and link.resolve() == REPO / "topics"
    assert catalogue.CATALOGUE_FILE.resolve() == REPO / "topics" / "catalogue.toml"
    assert sorted(path.name for path in (REPO / "topics").iterdir()) == ["catalogue.toml"]
    package_data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "topics/*.toml" in package_data["recurrence_ledger"]


def test_every_schema_of_the_catalogue_is_a_schema_file():
    files = [spec.schema for spec in catalogue.CATALOGUE] + [file for _, file in catalogue.PREVIOUS_SCHEMA_IDS.values()]
    for name in files:
        assert (REPO / "schemas" / f"recurrence_ledger.{name}.avsc").is_file(), name


def _broken(tmp_path: Path, text: str) -> str:
    path = tmp_path / "catalogue.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CatalogueError) as raised:
        load(path)
    assert isinstance(raised.value, RecurrenceLedgerError)
    assert str(path) in str(raised.value)
    return str(raised.value)


def test_the_repository_file_loads(tmp_path):
    path = tmp_path / "catalogue.toml"
    path.write_text(GOOD, encoding="utf-8")
    assert load(path).topic == catalogue.CATALOGUE


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda text: text + "\n[[topic]\n", "Expected"),  # not TOML
        (lambda text: text.replace('schema_id = 15', 'schema_id = "15"', 1), "schema_id"),
        (lambda text: text.replace('name = "dead-letter"', 'name = "dead-letter"\nreplicas = 3', 1), "replicas"),
        (lambda text: text.replace('retention_ms = 2_419_200_000', '', 1), "retention_ms"),
        (lambda text: text.replace('name = "dead-letter"', 'name = "recurrence-matches"', 1), "used by more than one topic"),
        (lambda text: text.replace('constant = "DEAD_LETTER"', 'constant = "MATCHES"', 1), "used by more than one topic"),
        (lambda text: text.replace('schema_id = 10', 'schema_id = 15', 1), "schema id 15 is given to"),
        (lambda text: text.replace('role = "dead-letter"', 'role = "input"', 1), "does not fit role"),
        (lambda text: text.replace('cleanup_policy = "compact"', 'cleanup_policy = "compacted"', 1), "cleanup_policy"),
        (lambda text: text.replace('schema_id = 6', 'schema_id = 7', 1), "also a current schema id"),
        (lambda text: text.replace('name = "source-journal"', 'name = "Source Journal"', 1), "name"),
    ],
)
def test_a_broken_catalogue_is_refused_with_what_is_wrong(tmp_path, change, says):
    text = change(GOOD)
    assert text != GOOD
    assert says in _broken(tmp_path, text)


def test_a_missing_catalogue_is_refused(tmp_path):
    with pytest.raises(CatalogueError, match="No such file"):
        load(tmp_path / "absent.toml")
