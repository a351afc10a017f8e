"""The routes of the operator API, one module per resource, which
``recurrence_ledger.api.app.create_app`` puts together:

- ``scopes``: ``GET /scopes`` and ``GET /scopes/{scope}/statistics``;
- ``revisions``: ``GET /scopes/{scope}/revisions`` and
  ``GET /scopes/{scope}/review-candidates``;
- ``service``: ``GET /healthz`` and the dashboard page ``GET /``;
- ``patterns``: ``GET /patterns?group=`` (contract §23) and its page
  ``/team-patterns``;
- ``history``: the read models' endpoints (a revision's history, a scope's
  trend, the review queue) and their pages ``/timeline`` and ``/review``.

The view's routes (the first three, and ``patterns``) are added to the app itself
(``register(app, …)``), the history's come as one ``APIRouter``
(``history.router``) that the app includes.

The read endpoints (and the query-parameter check every route runs,
``recurrence_ledger.api.params.known_query_only``) are ``async def`` that
call the synchronous redis-py client in the event loop: a read is one or
two pipelined round trips of tens of microseconds, cheaper than the two
thread hand-offs a plain ``def`` costs (FastAPI runs it in a worker thread),
which took half of the server's CPU per request (BENCHMARKS.md,
api-benchmark). A Redis that hangs stalls every request for at most the
reader's socket timeout (``recurrence_ledger.read.reader.REDIS_TIMEOUT_S``)
and then answers 503, as before. The decision (``POST``, which waits for
Kafka) and the HTML pages stay plain ``def``.
"""
