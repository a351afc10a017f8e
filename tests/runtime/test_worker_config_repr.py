"""``WorkerConfig``'s repr (and str, which is the same) never shows a secret:
the Redis URL's password goes through ``redis_connect.redact_url`` (as
``api.ApiSettings`` does), and the Kafka connection keeps its own redacting
repr (``client_config.KafkaConnection``: the values of ``SECRET_KEYS`` as
``***``). The follower's configuration and the Schema Registry settings
inside a WorkerConfig are redacted the same way."""

from __future__ import annotations

from recurrence_ledger.redact import redact_url
from recurrence_ledger.runtime.client_config import KafkaConnection
from recurrence_ledger.runtime.worker import WorkerConfig

REDIS_PASSWORD = "s3cret-redis-pw"
KAFKA_PASSWORD = "s3cret-kafka-pw"


def test_worker_config_repr_redacts_the_redis_password_and_the_kafka_credentials():
    connection = KafkaConnection(
        "kafka-1.example.net:9094",
        {"security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "ledger", "sasl.password": KAFKA_PASSWORD},
    )
    config = WorkerConfig(bootstrap=connection, instance_id="w1", redis_url=f"redis://:{REDIS_PASSWORD}@redis.example.net:6379/0")
    for shown in (repr(config), str(config), f"{config}"):
        assert REDIS_PASSWORD not in shown
        assert KAFKA_PASSWORD not in shown
        assert "redis_url='redis://:***@redis.example.net:6379/0'" in shown
        assert "'sasl.password': '***'" in shown and "'sasl.username': 'ledger'" in shown
        assert "instance_id='w1'" in shown  # the rest of the configuration is still shown
    assert redact_url(config.redis_url) == "redis://:***@redis.example.net:6379/0"
    assert config.redis_url == f"redis://:{REDIS_PASSWORD}@redis.example.net:6379/0"  # the value itself is untouched


def test_worker_config_repr_redacts_a_user_and_password_and_keeps_no_redis_url_as_none():
    with_user = WorkerConfig(bootstrap="127.0.0.1:9092", instance_id="w1", redis_url=f"rediss://ledger:{REDIS_PASSWORD}@redis.example.net:6380/2")
    assert REDIS_PASSWORD not in repr(with_user)
    assert "redis_url='rediss://ledger:***@redis.example.net:6380/2'" in repr(with_user)
    assert "redis_url=None" in repr(WorkerConfig(bootstrap="127.0.0.1:9092", instance_id="w1"))


def test_follower_config_and_registry_settings_repr_redact_their_urls():
    from recurrence_ledger.read.follower import FollowerConfig
    from recurrence_ledger.serde.registry import RegistrySettings

    follower = FollowerConfig(bootstrap="127.0.0.1:9092", redis_url=f"redis://:{REDIS_PASSWORD}@r:6379/0")
    assert REDIS_PASSWORD not in repr(follower) and "redis_url='redis://:***@r:6379/0'" in repr(follower)
    registry = RegistrySettings(url=f"http://user:{KAFKA_PASSWORD}@sr-1:8081, http://sr-2:8081")
    config = WorkerConfig(bootstrap="127.0.0.1:9092", instance_id="w1", schema_registry=registry)
    assert KAFKA_PASSWORD not in repr(config)
    assert "RegistrySettings(url='http://user:***@sr-1:8081,http://sr-2:8081', auto_register=True)" in repr(config)
