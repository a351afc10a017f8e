"""contract §9: the bad-input corpus and the tests that run it through the
embedded runner, the Kafka decode path, hypothesis fuzzing and the worker."""
