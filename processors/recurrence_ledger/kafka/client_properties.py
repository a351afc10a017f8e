"""Java client properties → a :class:`~recurrence_ledger.kafka.client_config.KafkaConnection`.

A deployment describes its cluster the way the Java tools are told
(``client.properties`` / ``--command-config``): ``key=value`` lines in the
``java.util.Properties`` format (comments, blank lines, ``\\`` escapes and
continuations; parsed with the ``javaproperties`` library). Only connection
and security settings are read; they are translated to librdkafka's names
where the Java client's differ:

- ``security.protocol`` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL);
- ``sasl.mechanism`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) → ``sasl.mechanisms``;
- ``sasl.jaas.config`` with ``ScramLoginModule`` / ``PlainLoginModule``
  ``required username="…" password="…";`` → ``sasl.username`` /
  ``sasl.password``;
- ``ssl.truststore.location`` with ``ssl.truststore.type=PEM`` (or a file
  that is PEM) → ``ssl.ca.location``; ``ssl.truststore.certificates``
  (inline PEM) → ``ssl.ca.pem``;
- ``ssl.keystore.location`` with ``ssl.keystore.type=PEM`` (private key and
  certificate chain in one PEM file) → ``ssl.certificate.location`` +
  ``ssl.key.location``; with ``PKCS12`` → librdkafka's
  ``ssl.keystore.location`` / ``ssl.keystore.password``;
  ``ssl.keystore.certificate.chain`` / ``ssl.keystore.key`` (inline PEM) →
  ``ssl.certificate.pem`` / ``ssl.key.pem``; ``ssl.key.password``;
- ``ssl.endpoint.identification.algorithm`` (``https``, or empty → ``none``);
- librdkafka's own names for the same things (``sasl.username``,
  ``sasl.password``, ``ssl.ca.location``, ``ssl.certificate.location``,
  ``ssl.key.location``, …), ``client.id`` and ``client.dns.lookup``.

Any other key (``acks``, ``group.id``, a JKS store, GSSAPI, …) is refused
with a ``ClientConfigError`` naming it: producer and consumer settings
are the product's own, per client (``client_config.consumer_config`` /
``producer_config``). ``KAFKA_``-prefixed environment variables
override the file like Confluent's images do (strip the prefix, lowercase,
``___`` → ``-``, ``__`` → ``_``, ``_`` → ``.``: ``KAFKA_SASL_PASSWORD`` →
``sasl.password``); ``KAFKA_BOOTSTRAP_SERVERS`` stays the bootstrap and
``KAFKA_CONFIG_FILE`` names the file (see :func:`env_overrides`).
:func:`load_connection` puts a command's file, variables and bootstrap
together.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import javaproperties

from recurrence_ledger.kafka.client_config import ClientConfigError, KafkaConnection

#: ``KAFKA_*`` variables that are not client settings (the bootstrap, the
#: properties file, and the knobs of the Kafka scripts and deploy/kafka.sh).
NOT_CLIENT_SETTINGS = frozenset(
    {
        "KAFKA_BOOTSTRAP_SERVERS",
        "KAFKA_CONFIG_FILE",
        "KAFKA_VERSION",
        "KAFKA_HOME",
        "KAFKA_PORT",
        "KAFKA_CONTROLLER_PORT",
        "KAFKA_MTLS_PORT",
        "KAFKA_START_TIMEOUT",
        "KAFKA_STOP_TIMEOUT",
        "KAFKA_HEAP_OPTS",
        "KAFKA_OPTS",
        "KAFKA_JVM_PERFORMANCE_OPTS",
        "KAFKA_GC_LOG_OPTS",
        "KAFKA_LOG4J_OPTS",
        "KAFKA_JMX_OPTS",
        "KAFKA_DEBUG",
    }
)
#: Environment variables under these prefixes must name a supported
#: setting (a typo in a security setting is an error, not ignored); other
#: unknown ``KAFKA_*`` variables are ignored.
STRICT_ENV_PREFIXES = ("KAFKA_SSL_", "KAFKA_SASL_", "KAFKA_SECURITY_")

_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_LOGIN_MODULES = {
    "org.apache.kafka.common.security.scram.ScramLoginModule": ("SCRAM-SHA-256", "SCRAM-SHA-512"),
    "org.apache.kafka.common.security.plain.PlainLoginModule": ("PLAIN",),
}
#: Keys read as they are (librdkafka's names; the value is passed on).
_PASSTHROUGH = frozenset(
    {
        "security.protocol",
        "sasl.username",
        "sasl.password",
        "ssl.ca.location",
        "ssl.ca.pem",
        "ssl.certificate.location",
        "ssl.certificate.pem",
        "ssl.key.location",
        "ssl.key.pem",
        "ssl.key.password",
        "client.id",
        "client.dns.lookup",
    }
)
#: Java client names that are translated (see the module docstring).
_TRANSLATED = frozenset(
    {
        "bootstrap.servers",
        "sasl.mechanism",
        "sasl.mechanisms",
        "sasl.jaas.config",
        "ssl.truststore.location",
        "ssl.truststore.type",
        "ssl.truststore.password",
        "ssl.truststore.certificates",
        "ssl.keystore.location",
        "ssl.keystore.type",
        "ssl.keystore.password",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.endpoint.identification.algorithm",
    }
)
SUPPORTED_KEYS = _PASSTHROUGH | _TRANSLATED



def read_properties(path: Path) -> dict[str, str]:
    """The key/value pairs of a ``java.util.Properties`` file (later keys win).
    Raises ClientConfigError when it cannot be read."""
    try:
        with open(path, encoding="latin-1") as handle:  # java.util.Properties.load(InputStream): ISO 8859-1
            return dict(javaproperties.load(handle))
    except OSError as error:
        raise ClientConfigError(f"cannot read the Kafka client properties file {path}: {error.strerror or error}") from None
    except Exception as error:  # javaproperties.InvalidUEscapeError, UnicodeDecodeError…
        raise ClientConfigError(f"{path} is not a Java properties file: {type(error).__name__}") from None


def env_overrides(environ: Mapping[str, str]) -> dict[str, str]:
    """Client settings from ``KAFKA_*`` environment variables, as property
    names: ``KAFKA_SASL_PASSWORD`` → ``sasl.password`` (strip ``KAFKA_``,
    lowercase, ``___`` → ``-``, ``__`` → ``_``, ``_`` → ``.``, as Confluent's
    images do). :data:`NOT_CLIENT_SETTINGS` are skipped; an unsupported
    name under :data:`STRICT_ENV_PREFIXES` raises ClientConfigError naming
    the variable; other unknown ``KAFKA_*`` variables are ignored."""
    result: dict[str, str] = {}
    for name, value in environ.items():
        if not name.startswith("KAFKA_") or name in NOT_CLIENT_SETTINGS:
            continue
        key = name[len("KAFKA_"):].lower().replace("___", "\0").replace("__", "\1").replace("_", ".")
        key = key.replace("\0", "-").replace("\1", "_")
        if key in SUPPORTED_KEYS:
            result[key] = value
        elif name.startswith(STRICT_ENV_PREFIXES):
            raise ClientConfigError(f"environment variable {name} (→ {key}) is not a supported Kafka client setting; supported: {', '.join(sorted(SUPPORTED_KEYS))}")
    return result


_JAAS = re.compile(r"\s*(?P<module>[A-Za-z0-9_.$]+)\s+(?P<flag>required|requisite|sufficient|optional)(?P<options>.*?);?\s*$", re.S)
_JAAS_OPTION = re.compile(r"""\s*(?P<key>[A-Za-z0-9_.\-]+)\s*=\s*(?:"(?P<dq>(?:[^"\\]|\\.)*)"|'(?P<sq>(?:[^'\\]|\\.)*)'|(?P<bare>[^\s"';]+))""", re.S)


def parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """``(login module class, options)`` of one ``sasl.jaas.config`` entry
    (``Module required key="value" …;``; double or single quotes, ``\\``
    escapes inside them, as Kafka's JaasConfig reads it). Raises
    ClientConfigError without quoting the value (it holds a password)."""
    match = _JAAS.match(text)
    if match is None:
        raise ClientConfigError("sasl.jaas.config is not of the form `<LoginModule> required username=\"…\" password=\"…\";` (value not shown: it holds a secret)")
    options: dict[str, str] = {}
    rest = match["options"]
    position = 0
    while rest[position:].strip():
        option = _JAAS_OPTION.match(rest, position)
        if option is None:
            raise ClientConfigError(f"sasl.jaas.config: cannot read the options of {match['module']} (value not shown: it holds a secret)")
        raw = option["dq"] if option["dq"] is not None else option["sq"] if option["sq"] is not None else option["bare"]
        options[option["key"]] = re.sub(r"\\(.)", r"\1", raw, flags=re.S)
        position = option.end()
    return match["module"], options


def _is_pem(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            return b"-----BEGIN " in handle.read(64 * 1024)
    except OSError:
        return False


def is_registry_key(key: str) -> bool:
    """Whether a client properties key configures the Schema Registry client
    (``schema.registry.*``, ``basic.auth.*``, ``auto.register.schemas``; read
    by ``recurrence_ledger.serde.registry.registry_settings``) rather than
    Kafka: the same file carries both, as with Confluent's tools."""
    key = key.strip()
    return key.startswith(("schema.registry.", "basic.auth.")) or key == "auto.register.schemas"


def translate(properties: Mapping[str, str], source: str = "client properties") -> tuple[str | None, dict[str, str]]:
    """``(bootstrap.servers or None, librdkafka settings)`` of Java-style
    client ``properties`` (see the module docstring); Schema Registry keys
    (:func:`is_registry_key`) are left to the registry client. ``source``
    names the file or variables in messages. Raises ClientConfigError naming
    the key."""
    props = {key.strip(): value.strip() for key, value in properties.items() if not is_registry_key(key)}
    unsupported = sorted(key for key in props if key not in SUPPORTED_KEYS)
    if unsupported:
        raise ClientConfigError(
            f"{source}: unsupported Kafka client setting {', '.join(repr(k) for k in unsupported)}: only connection and security settings are read "
            f"(supported: {', '.join(sorted(SUPPORTED_KEYS))})"
        )
    out: dict[str, str] = {key: props[key] for key in _PASSTHROUGH if key in props}
    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in _PROTOCOLS:
        raise ClientConfigError(f"{source}: security.protocol {props['security.protocol']!r} is not one of {', '.join(_PROTOCOLS)}")
    if "security.protocol" in props:
        out["security.protocol"] = protocol

    mechanism = props.get("sasl.mechanism") or props.get("sasl.mechanisms")
    if mechanism is not None:
        if mechanism.upper() not in _MECHANISMS:
            raise ClientConfigError(f"{source}: sasl.mechanism {mechanism!r} is not supported (one of {', '.join(_MECHANISMS)})")
        out["sasl.mechanisms"] = mechanism = mechanism.upper()
    if "sasl.jaas.config" in props:
        module, options = parse_jaas(props["sasl.jaas.config"])
        allowed = _LOGIN_MODULES.get(module)
        if allowed is None:
            raise ClientConfigError(f"{source}: sasl.jaas.config login module {module} is not supported (ScramLoginModule or PlainLoginModule)")
        if mechanism is not None and mechanism not in allowed:
            raise ClientConfigError(f"{source}: sasl.jaas.config uses {module.rsplit('.', 1)[-1]}, which does not serve sasl.mechanism {mechanism}")
        if "username" not in options or "password" not in options:
            raise ClientConfigError(f"{source}: sasl.jaas.config needs username=\"…\" and password=\"…\"")
        out.setdefault("sasl.username", options["username"])
        out.setdefault("sasl.password", options["password"])
        if mechanism is None and allowed == ("PLAIN",):
            out["sasl.mechanisms"] = "PLAIN"

    if "ssl.truststore.location" in props:
        kind = props.get("ssl.truststore.type", "").upper()
        location = props["ssl.truststore.location"]
        if kind not in ("", "PEM") or (kind == "" and not _is_pem(location)):
            raise ClientConfigError(
                f"{source}: ssl.truststore.type {kind or 'JKS (the default)'} is not supported: give the CA certificates as PEM "
                f"(keytool -exportcert -rfc …) with ssl.truststore.type=PEM, or ssl.ca.location"
            )
        if "ssl.truststore.password" in props:
            raise ClientConfigError(f"{source}: ssl.truststore.password cannot be used with a PEM trust store (the Java client refuses it too)")
        out["ssl.ca.location"] = location
    elif "ssl.truststore.password" in props or props.get("ssl.truststore.type", "PEM").upper() != "PEM":
        raise ClientConfigError(f"{source}: ssl.truststore.type/password without a PEM ssl.truststore.location is not supported")
    if "ssl.truststore.certificates" in props:
        out["ssl.ca.pem"] = props["ssl.truststore.certificates"]

    if "ssl.keystore.location" in props:
        kind = props.get("ssl.keystore.type", "").upper()
        location = props["ssl.keystore.location"]
        if kind == "" and _is_pem(location):
            kind = "PEM"
        if kind == "PEM":
            if "ssl.keystore.password" in props:
                raise ClientConfigError(f"{source}: ssl.keystore.password cannot be used with a PEM key store; give ssl.key.password for an encrypted key")
            out["ssl.certificate.location"] = location
            out["ssl.key.location"] = location
        elif kind == "PKCS12":
            out["ssl.keystore.location"] = location
            if "ssl.keystore.password" in props:
                out["ssl.keystore.password"] = props["ssl.keystore.password"]
        else:
            raise ClientConfigError(f"{source}: ssl.keystore.type {kind or 'JKS (the default)'} is not supported: use PEM (private key and certificate chain in one file) or PKCS12")
    elif "ssl.keystore.password" in props or "ssl.keystore.type" in props and "ssl.keystore.key" not in props:
        raise ClientConfigError(f"{source}: ssl.keystore.type/password without ssl.keystore.location")
    if "ssl.keystore.certificate.chain" in props:
        out["ssl.certificate.pem"] = props["ssl.keystore.certificate.chain"]
    if "ssl.keystore.key" in props:
        out["ssl.key.pem"] = props["ssl.keystore.key"]

    if "ssl.endpoint.identification.algorithm" in props:
        algorithm = props["ssl.endpoint.identification.algorithm"].lower()
        if algorithm not in ("", "https", "none"):
            raise ClientConfigError(f"{source}: ssl.endpoint.identification.algorithm {algorithm!r} is not supported (https, or empty to disable)")
        out["ssl.endpoint.identification.algorithm"] = algorithm or "none"
    return props.get("bootstrap.servers") or None, out


def check_complete(settings: Mapping[str, str], source: str) -> None:
    """Raise ClientConfigError when translated ``settings`` cannot work: a
    SASL protocol without a mechanism or without credentials."""
    protocol = settings.get("security.protocol", "PLAINTEXT")
    if protocol.startswith("SASL_"):
        if "sasl.mechanisms" not in settings:
            raise ClientConfigError(f"{source}: security.protocol {protocol} needs sasl.mechanism ({', '.join(_MECHANISMS)})")
        if not ("sasl.username" in settings and "sasl.password" in settings):
            raise ClientConfigError(f"{source}: security.protocol {protocol} needs credentials (sasl.jaas.config, or sasl.username and sasl.password)")


def load_connection(bootstrap: str | None, config_file: Path | None = None, environ: Mapping[str, str] | None = None) -> KafkaConnection:
    """The connection of a command: ``config_file`` (a Java-style client
    properties file, may be None) overridden by the ``KAFKA_*`` variables of
    ``environ`` (:func:`env_overrides`), translated (:func:`translate`).
    ``bootstrap`` (``--bootstrap`` / ``KAFKA_BOOTSTRAP_SERVERS``) wins over
    the file's ``bootstrap.servers``. Raises ClientConfigError."""
    file_bootstrap, settings, sources = None, {}, []
    if config_file is not None:
        file_bootstrap, settings = translate(read_properties(config_file), str(config_file))
        sources.append(str(config_file))
    overrides = env_overrides(environ or {})
    if overrides:
        # Translated on their own, so that e.g. KAFKA_SSL_CA_LOCATION
        # replaces the file's ssl.truststore.location (both → ssl.ca.location).
        _, translated = translate(overrides, "KAFKA_* variables")
        settings.update(translated)
        sources.append("KAFKA_* variables")
    source = " + ".join(sources) or "no client properties"
    check_complete(settings, source)
    servers = bootstrap or file_bootstrap
    if not servers:
        raise ClientConfigError("no Kafka bootstrap servers: give --bootstrap, KAFKA_BOOTSTRAP_SERVERS or bootstrap.servers in the --kafka-config file")
    return KafkaConnection(servers, settings, source)
