"""``WorkerConfig``'s repr (and str, which is the same) never shows a secret:
the Kafka connection keeps its own redacting repr
(``client_config.KafkaConnection``: the values of ``SECRET_KEYS`` as
``***``), and so do the Schema Registry settings inside it. The Redis URL is
not the worker's: the in-process view follower's configuration
(``cli.beside.follower_config``) carries it, its password through
``redact.redact_url`` (as ``api.ApiSettings`` does)."""

from __future__ import annotations

from recurrence_ledger.cli.beside import follower_config
from recurrence_ledger.redact import redact_url
from recurrence_ledger.kafka.client_config import KafkaConnection
from recurrence_ledger.runtime.worker_config import WorkerConfig

REDIS_PASSWORD = "s3cret-redis-pw"
KAFKA_PASSWORD = "s3cret-kafka-pw"


def test_worker_config_repr_redacts_the_kafka_credentials():
    connection = KafkaConnection(
        "kafka-1.example.net:9094",
        {"security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "ledger", "sasl.password": KAFKA_PASSWORD},
    )
    config = WorkerConfig(bootstrap=connection, instance_id="w1")
    for shown in (repr(config), str(config), f"{config}"):
        assert KAFKA_PASSWORD not in shown
        assert "'sasl.password': '***'" in shown and "'sasl.username': 'ledger'" in shown
        assert "instance_id='w1'" in shown  # the rest of the configuration is still shown
        assert "redis" not in shown


def test_the_in_process_follower_config_redacts_the_redis_password_and_keeps_the_worker_s_deployment():
    worker = WorkerConfig(bootstrap="127.0.0.1:9092", instance_id="w1", app_id="app", topic_prefix="p.")
    url = f"redis://:{REDIS_PASSWORD}@redis.example.net:6379/0"
    follower = follower_config(worker, url)
    assert REDIS_PASSWORD not in repr(follower) and "redis_url='redis://:***@redis.example.net:6379/0'" in repr(follower)
    assert follower.redis_url == url  # the value itself is untouched
    assert (follower.group_id, follower.topic_prefix) == ("p.app-view", "p.")
    assert not hasattr(follower, "review_threshold")  # the review set is the ledger's decision, published in the view
    with_user = follower_config(worker, f"rediss://ledger:{REDIS_PASSWORD}@redis.example.net:6380/2")
    assert REDIS_PASSWORD not in repr(with_user) and "redis_url='rediss://ledger:***@redis.example.net:6380/2'" in repr(with_user)
    assert redact_url(url) == "redis://:***@redis.example.net:6379/0"


def test_registry_settings_repr_redacts_its_urls():
    from recurrence_ledger.serde.registry import RegistrySettings

    registry = RegistrySettings(url=f"http://user:{KAFKA_PASSWORD}@sr-1:8081, http://sr-2:8081")
    config = WorkerConfig(bootstrap="127.0.0.1:9092", instance_id="w1", schema_registry=registry)
    assert KAFKA_PASSWORD not in repr(config)
    assert "RegistrySettings(url='http://user:***@sr-1:8081,http://sr-2:8081', auto_register=True)" in repr(config)
