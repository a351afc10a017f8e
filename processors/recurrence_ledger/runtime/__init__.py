"""The Kafka runtime: the worker's read-process-write loop, topic administration, replay and metrics."""
