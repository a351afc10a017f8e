"""The read side: the view follower reads the committed view and ledger
topics into Redis (the projection of ScopeStatistics and RevisionStatistics,
contract §8, and the history read models), ``keys.py`` owns every Redis key
name, ``reader.py`` reads them for the API and the CLI, and ``rebuild.py``
recomputes them from the topics. Derived data only: all of it can be
dropped and rebuilt."""
