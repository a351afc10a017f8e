"""The routes of the operator API, one module per resource, which
``recurrence_ledger.api.app.create_app`` puts together:

- ``scopes``: ``GET /scopes`` and ``GET /scopes/{scope}/statistics``;
- ``revisions``: ``GET /scopes/{scope}/revisions`` and
  ``GET /scopes/{scope}/review-candidates``;
- ``service``: ``GET /healthz`` and the dashboard page ``GET /``;
- ``history``: the read models' endpoints (a revision's history, a scope's
  trend, the review queue) and their pages ``/timeline`` and ``/review``.

The view's routes (the first three) are added to the app itself
(``register(app, …)``), the history's come as one ``APIRouter``
(``history.router``) that the app includes.
"""
