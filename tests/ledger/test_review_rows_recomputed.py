"""contract §18: at the end of a batch the core computes again only the
ReviewStatus rows the batch may have changed (``ReviewLoop._review_rows``:
the candidates just published or decided, every candidate of an artifact a
revision of which arrived, the candidates below a revision whose figures
changed). Held here against a processor that computes every candidate's row
at every batch: in any arrival order and any batch size, both publish the
same rows in the same order, and the same statistics."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from recurrence_ledger.ledger.processor import LedgerConfig, LedgerProcessor
from tests.journal import Ledger, causal_order, check, experience, fix_journal, outcome

S = "rows"
CUE = "port already bound"


class EveryRow(LedgerProcessor):
    """A processor that computes the row of every candidate of a changed
    scope at every batch: what the narrowed computation must publish."""

    def _review_rows(self, scope, scope_id, marked, candidates, revisions, emits):
        every = [key[2] for key in self.state.store if key[0] == "reviews" and key[1] == scope_id]
        super()._review_rows(scope, scope_id, every, (), (), emits)


def journal(history: list[bool], approve: bool, third: int | None, later: list[bool]) -> list[dict]:
    """``fix_journal`` (a candidate of E1 r1, fixed or superseded by r2,
    whose verdicts follow ``history``), with E1 r3 at position ``third``
    (None: none) and unlinked recurrences (True) of the cue after the rest,
    which lengthen the runs of the head they match and so give it candidates
    of its own."""
    records = fix_journal(S, history, approve)
    last = 30 + 10 * len(history) + 1
    if third is not None:
        records.append(experience(S, third, "E1", revision=3, cue=CUE))
    records += [outcome(S, last + 10 * number, f"L{number}", checks=[check(CUE)]) for number, recurs in enumerate(later) if recurs]
    return records


def published(ledger: Ledger) -> tuple[list[dict], list[dict]]:
    ledger.flush()
    return ledger.out["review-status"], ledger.out["recurrence-statistics"]


@settings(max_examples=150, deadline=None)
@given(
    history=st.lists(st.booleans(), max_size=10),
    approve=st.booleans(),
    third=st.one_of(st.none(), st.sampled_from([25, 45, 75])),
    later=st.lists(st.booleans(), max_size=8),
    threshold=st.sampled_from([1, 2, 3]),
    data=st.data(),
)
def test_the_rows_computed_again_are_every_row_that_changes(history, approve, third, later, threshold, data):
    records = journal(history, approve, third, later)
    order = causal_order(data.draw(st.permutations(records), label="arrival"))
    view_batch = data.draw(st.integers(min_value=1, max_value=len(records) + 1), label="view_batch")
    config = LedgerConfig(review_threshold=threshold)
    narrowed = Ledger(config, view_batch).feed(*order)
    reference = Ledger(config, view_batch)
    reference.processor = EveryRow(config=config, validate_outputs=True)
    rows, statistics = published(narrowed)
    assert (rows, statistics) == published(reference.feed(*order))
    assert rows  # every journal publishes r1's candidate


def test_a_row_published_by_an_earlier_release_is_published_again_at_the_next_batch_of_its_artifact():
    """A ReviewStatus row whose stored digest is not that of the row this
    code computes (a row an earlier release published without a field added
    since, such as ``reason_code``): the first batch after the state is read
    that touches its artifact publishes it again, even when nothing above
    its revision changed (docs/upgrading.md: the next batch republishes the
    views)."""
    config = LedgerConfig(review_threshold=2)
    ledger = Ledger(config).feed(experience(S, 1, "E1", cue=CUE), *(outcome(S, p, f"U{p}", checks=[check(CUE)]) for p in (5, 6)))
    [row] = ledger.out["review-status"]
    store = ledger.processor.state.store
    record = store[("review", S, row["candidate_id"])]
    store[("review", S, row["candidate_id"])] = {**record, "published": "sha256:" + "0" * 64}  # as an earlier release left it
    restarted = Ledger(config)
    restarted.processor = LedgerProcessor(store, config, validate_outputs=True)
    restarted.offset = ledger.offset
    restarted.feed(outcome(S, 7, "U7", checks=[check(CUE)]))  # one more recurrence of r1, in the same run
    assert restarted.out["review-status"] == [row]
    restarted.feed(outcome(S, 8, "U8", checks=[check(CUE)]))
    assert restarted.out["review-status"] == [row]  # published once
