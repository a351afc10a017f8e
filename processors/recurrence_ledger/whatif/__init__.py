"""Policy replay and what-if reports (contract §20, docs/tuning.md).

A **policy replay** runs retained inputs — a journal file, or the
deployment's input topics from the beginning to their current end — through
the same core under other policies, into a folder of its own; a **what-if
report** compares the baseline policy with an alternative, or with each
value of a sweep, per scope.

- :mod:`~recurrence_ledger.whatif.policies`: the four settings of a policy,
  sweeps, and how policies share one pass over the inputs;
- :mod:`~recurrence_ledger.whatif.shadow`: the processor that computes other
  review and near-duplicate thresholds from the runs and admission
  decisions of one pass (pure, like the core);
- :mod:`~recurrence_ledger.whatif.results`: what one policy concluded;
  :mod:`~recurrence_ledger.whatif.compare`: baseline against alternative;
- :mod:`~recurrence_ledger.whatif.replay`: the run over a journal or
  topics (:mod:`~recurrence_ledger.whatif.topics` reads the topics);
- :mod:`~recurrence_ledger.whatif.report` and
  :mod:`~recurrence_ledger.whatif.chart`: report.md, report.json and the
  sweep's chart.

Nothing here writes to a topic, a consumer group, a state store or Redis.
"""
