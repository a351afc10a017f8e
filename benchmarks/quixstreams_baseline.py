"""The quixstreams baseline of ``kafka_benchmark.py`` (not a test): a stateful
exactly-once quixstreams ``Application`` run as a child process of that
script (``kafka_benchmark.py --quixstreams-child ...``).

It imports only the standard library and quixstreams, never this project
nor its confluent-kafka: quixstreams pins an older confluent-kafka than the
project's, so it usually runs under another interpreter (the ``bench``
dependency group of pyproject.toml installed in a virtualenv of its own,
``kafka_benchmark.py --quixstreams-python``).

What it does: read the input topic from the earliest offset (bytes in, no
decoding), keep one counter per record key in the default state store
(RocksDB, with its changelog topic ``changelog__<group>--<topic>--default``)
with one ``State.get`` + ``State.set`` per record, and produce one record
per input record — the input key and value unchanged — to the output
topic, stamped with the time it is processed (``set_timestamp``:
quixstreams otherwise gives an output the timestamp of its input record,
the publish time, and kafka_benchmark.py reads an output's CreateTime as
the moment the process emitted it); ``processing_guarantee="exactly-once"`` (one Kafka transaction per
checkpoint carrying the outputs, the changelog records and the consumed
offsets), a checkpoint every ``--commit-interval-ms`` (100 ms, as the
worker). Stops after ``--exit-when-idle`` seconds without a new message
(``Application.run(timeout=...)``), committing the last checkpoint.
"""

from __future__ import annotations

import argparse
import time


def count_per_key(value: bytes, state) -> bytes:
    """One state update per record: the record key's counter + 1."""
    state.set("n", state.get("n", 0) + 1)
    return value


def now_ms(value: bytes, key: bytes, timestamp: int, headers) -> int:
    """The output record's timestamp: now (processing time), in ms."""
    return time.time_ns() // 1_000_000


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="kafka_benchmark.py --quixstreams-child")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--in-topic", required=True)
    parser.add_argument("--out-topic", required=True)
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--commit-interval-ms", type=int, default=100)
    parser.add_argument("--exit-when-idle", type=float, default=3.0)
    args = parser.parse_args(argv)

    from quixstreams import Application

    app = Application(
        broker_address=args.bootstrap,
        consumer_group=args.group,
        auto_offset_reset="earliest",
        processing_guarantee="exactly-once",
        commit_interval=args.commit_interval_ms / 1000,
        state_dir=args.state_dir,
        loglevel="INFO",
    )
    source = app.topic(args.in_topic, key_deserializer="bytes", value_deserializer="bytes")
    sink = app.topic(args.out_topic, key_serializer="bytes", value_serializer="bytes")
    sdf = app.dataframe(source)
    sdf = sdf.apply(count_per_key, stateful=True)
    sdf = sdf.set_timestamp(now_ms)
    sdf = sdf.to_topic(sink)
    app.run(timeout=args.exit_when_idle, collect=False)
    return 0
