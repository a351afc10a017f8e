"""The Kafka client configuration (recurrence_ledger.kafka.client_config):
Java client properties → librdkafka settings, KAFKA_* overrides, refusals
that name the key, and a repr that never shows a secret. No broker needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from recurrence_ledger.kafka.client_config import ClientConfigError, KafkaConnection, client_config
from recurrence_ledger.kafka.client_properties import env_overrides, load_connection, parse_jaas, read_properties, translate

SECRET = "s3cr3t-Pa55=word;\\x"
PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="latin-1")
    return path


def test_properties_are_read_as_java_util_properties(tmp_path):
    path = write(
        tmp_path / "client.properties",
        "# comment\n! other comment\n\n  bootstrap.servers = b1:9092,\\\n     b2:9092\n"
        "client.id:ledger\\u0041\nsasl.username  tab\\tuser\n",
    )
    assert read_properties(path) == {"bootstrap.servers": "b1:9092,b2:9092", "client.id": "ledgerA", "sasl.username": "tab\tuser"}


def test_a_sasl_ssl_scram_file_becomes_librdkafka_settings(tmp_path):
    ca = write(tmp_path / "ca.pem", PEM)
    path = write(
        tmp_path / "client.properties",
        "bootstrap.servers=broker:9094\nsecurity.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        '    username="ledger" password="pa\\\\"ss";\n'
        f"ssl.truststore.type=PEM\nssl.truststore.location={ca}\nssl.endpoint.identification.algorithm=\n",
    )
    connection = load_connection(None, path, {})
    assert connection.bootstrap == "broker:9094"
    assert client_config(connection) == {
        "bootstrap.servers": "broker:9094",
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "ledger",
        "sasl.password": 'pa"ss',
        "ssl.ca.location": str(ca),
        "ssl.endpoint.identification.algorithm": "none",
    }


def test_the_bootstrap_option_wins_over_the_file(tmp_path):
    path = write(tmp_path / "c.properties", "bootstrap.servers=file:9092\n")
    assert load_connection("cli:9092", path, {}).bootstrap == "cli:9092"
    with pytest.raises(ClientConfigError, match="no Kafka bootstrap servers"):
        load_connection(None, None, {})


def test_jaas_single_quotes_plain_login_and_escapes():
    module, options = parse_jaas("org.apache.kafka.common.security.plain.PlainLoginModule required username='key' password='a\\'b c';")
    assert module.endswith("PlainLoginModule") and options == {"username": "key", "password": "a'b c"}
    bootstrap, settings = translate(
        {"security.protocol": "SASL_SSL", "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"k\" password=\"p\";"}
    )
    assert settings["sasl.mechanisms"] == "PLAIN" and settings["sasl.password"] == "p" and bootstrap is None


def test_pem_keystore_and_pkcs12_keystore(tmp_path):
    keystore = write(tmp_path / "client.pem", "-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----\n" + PEM)
    _, settings = translate({"security.protocol": "SSL", "ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore), "ssl.key.password": "kp"})
    assert settings == {"security.protocol": "SSL", "ssl.certificate.location": str(keystore), "ssl.key.location": str(keystore), "ssl.key.password": "kp"}
    _, settings = translate({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "/x.p12", "ssl.keystore.password": "pw"})
    assert settings == {"ssl.keystore.location": "/x.p12", "ssl.keystore.password": "pw"}
    _, settings = translate({"ssl.keystore.certificate.chain": PEM, "ssl.keystore.key": "KEY", "ssl.truststore.certificates": PEM})
    assert settings == {"ssl.certificate.pem": PEM.strip(), "ssl.key.pem": "KEY", "ssl.ca.pem": PEM.strip()}


@pytest.mark.parametrize(
    ("properties", "named"),
    [
        ({"acks": "all"}, "'acks'"),
        ({"group.id": "g", "sasl.kerberos.service.name": "kafka"}, "'group.id', 'sasl.kerberos.service.name'"),
        ({"ssl.truststore.location": "/t.jks", "ssl.truststore.type": "JKS"}, "ssl.truststore.type JKS"),
        ({"ssl.truststore.location": "/missing.jks"}, "JKS (the default)"),
        ({"ssl.keystore.location": "/k.jks", "ssl.keystore.type": "JKS"}, "ssl.keystore.type JKS"),
        ({"sasl.mechanism": "GSSAPI"}, "sasl.mechanism 'GSSAPI'"),
        ({"security.protocol": "SASL_TLS"}, "security.protocol 'SASL_TLS'"),
        ({"sasl.jaas.config": "com.example.KerberosLoginModule required;"}, "KerberosLoginModule"),
        ({"sasl.mechanism": "PLAIN", "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"u\" password=\"p\";"}, "does not serve sasl.mechanism PLAIN"),
        ({"ssl.endpoint.identification.algorithm": "ldap"}, "ssl.endpoint.identification.algorithm"),
    ],
)
def test_unsupported_settings_are_refused_by_name(properties, named):
    with pytest.raises(ClientConfigError) as caught:
        translate(properties, "client.properties")
    assert named in str(caught.value)


def test_sasl_without_mechanism_or_credentials_is_refused(tmp_path):
    path = write(tmp_path / "c.properties", "security.protocol=SASL_SSL\nsasl.username=u\nsasl.password=p\n")
    with pytest.raises(ClientConfigError, match="needs sasl.mechanism"):
        load_connection("b:1", path, {})
    path = write(tmp_path / "c.properties", "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n")
    with pytest.raises(ClientConfigError, match="needs credentials"):
        load_connection("b:1", path, {})


def test_env_overrides_follow_the_confluent_image_convention():
    environ = {
        "KAFKA_SASL_PASSWORD": "p",
        "KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "KAFKA_BOOTSTRAP_SERVERS": "b:1",
        "KAFKA_HEAP_OPTS": "-Xmx1g",
        "KAFKA_SOMETHING_ELSE": "ignored",
        "KAFKA_CLIENT_ID": "c",
        "OTHER": "x",
    }
    assert env_overrides(environ) == {"sasl.password": "p", "security.protocol": "SASL_SSL", "client.id": "c"}
    with pytest.raises(ClientConfigError, match=r"KAFKA_SASL_PASWORD \(→ sasl.pasword\)"):
        env_overrides({"KAFKA_SASL_PASWORD": "typo"})


def test_env_overrides_win_over_the_file_after_translation(tmp_path):
    ca = write(tmp_path / "ca.pem", PEM)
    other = write(tmp_path / "other.pem", PEM)
    path = write(
        tmp_path / "c.properties",
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="file";\n'
        f"ssl.truststore.type=PEM\nssl.truststore.location={ca}\n",
    )
    settings = load_connection("b:1", path, {"KAFKA_SASL_PASSWORD": "env", "KAFKA_SSL_CA_LOCATION": str(other)}).settings
    assert settings["sasl.password"] == "env" and settings["sasl.username"] == "u" and settings["ssl.ca.location"] == str(other)


def test_no_secret_in_repr_str_or_errors(tmp_path):
    connection = KafkaConnection("b:1", {"sasl.username": "u", "sasl.password": SECRET, "ssl.key.password": SECRET, "ssl.key.pem": SECRET})
    for text in (repr(connection), str(connection), f"{connection}", connection.description):
        assert SECRET not in text
    assert "'sasl.password': '***'" in repr(connection)
    for jaas in (f'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="{SECRET}" broken=', f"junk {SECRET}"):
        with pytest.raises(ClientConfigError) as caught:
            translate({"sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": jaas})
        assert SECRET not in str(caught.value)


def test_unreadable_file_is_a_config_error(tmp_path):
    with pytest.raises(ClientConfigError, match="cannot read"):
        load_connection("b:1", tmp_path / "missing.properties", {})


def test_plain_bootstrap_is_the_old_base_config():
    assert client_config("h:9092") == {"bootstrap.servers": "h:9092"}
    assert client_config(load_connection("h:9092", None, {})) == {"bootstrap.servers": "h:9092"}


def test_one_properties_file_carries_kafka_and_schema_registry_settings(tmp_path):
    """The Schema Registry keys of a client properties file go to the
    registry client, the rest to librdkafka; neither refuses the other's."""
    from recurrence_ledger.cli import clients as cli

    path = tmp_path / "client.properties"
    path.write_text(
        "bootstrap.servers=broker:9094\n"
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="ledger" password="s3cret";\n'
        "schema.registry.url=https://registry:8081/apis/ccompat/v7\n"
        "basic.auth.credentials.source=USER_INFO\nbasic.auth.user.info=reader:r3g-secret\n"
        "auto.register.schemas=false\n"
    )
    connection = load_connection(None, path, {})
    assert connection.bootstrap == "broker:9094"
    assert not any(key.startswith(("schema.registry", "basic.auth", "auto.register")) for key in connection.settings)
    registry = cli.command_registry(None, None, path)
    assert registry is not None and registry.url == "https://registry:8081/apis/ccompat/v7"
    assert registry.auto_register is False
    assert cli.command_registry(None, None, None) is None


def test_every_consumer_reads_committed_records_and_every_producer_is_idempotent():
    """client_config's builders: one place for what every client of the
    package is told (a Consumer/Producer accepts these dicts; no broker)."""
    from confluent_kafka import Consumer, Producer

    from recurrence_ledger.kafka.client_config import consumer_config, producer_config
    from recurrence_ledger.runtime.worker_config import WorkerConfig, input_consumer_config, output_producer_config

    connection = KafkaConnection("h:9093", {"security.protocol": "SSL", "ssl.ca.location": "/ca.pem"})
    consumer = consumer_config(connection, "g", {"enable.partition.eof": True})
    assert consumer == {
        "bootstrap.servers": "h:9093", "security.protocol": "SSL", "ssl.ca.location": "/ca.pem",
        "group.id": "g", "isolation.level": "read_committed", "enable.auto.commit": False, "enable.partition.eof": True,
    }
    with pytest.raises(ValueError, match="read_committed"):
        consumer_config("h:9092", "g", {"isolation.level": "read_uncommitted"})
    assert producer_config("h:9092") == {"bootstrap.servers": "h:9092", "enable.idempotence": True, "acks": "all", "linger.ms": 5}
    worker = WorkerConfig(bootstrap="127.0.0.1:1", app_id="app", topic_prefix="p.", instance_id="w1")
    assert output_producer_config(worker)["transactional.id"] == "p.app-w1"
    assert input_consumer_config("127.0.0.1:1", "p.app", "w1")["isolation.level"] == "read_committed"
    Consumer(input_consumer_config("127.0.0.1:1", "p.app", "w1")).close()  # librdkafka takes them as they are
    Producer(output_producer_config(worker))
