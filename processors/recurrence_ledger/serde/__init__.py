"""The wire contract in code: Avro bodies of ``schemas/*.avsc`` (fastavro),
the Confluent framing with fixed schema ids or a Schema Registry's ids, and
JSON values — one ``Codec`` seam that the runtime and the read side use to
turn Kafka record values into the core's dicts and back (contract §1, §9)."""
