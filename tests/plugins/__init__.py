"""The tests' own pytest plugins and shared helpers (registered in
tests/conftest.py): service fixtures and markers (``services``, ``secure``)
and the processes tests start (``processes``)."""
