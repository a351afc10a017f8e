"""Record values on the wire (contract §1, §9): the one encode/decode seam.

Every part of the package encodes and decodes record values through this
module: the :class:`Codec` interface, the Confluent frame and the fixed-id
codec :data:`FIXED` (defined in ``recurrence_ledger.serde.wire``, imported
here), and :func:`make_codec`, the codec of a deployment — :data:`FIXED`
without a Schema Registry, else ``recurrence_ledger.serde.registry.
RegistryCodec``. See ``recurrence_ledger.serde.wire`` for the framing and
the JSON rules both codecs share.

The module functions :func:`encode`, :func:`decode_value` and
:func:`decode_source` are the fixed-id codec's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from recurrence_ledger.serde.wire import (  # noqa: F401 - the seam's names, imported from where they are defined
    AVRO,
    FIXED,
    JSON,
    MAGIC,
    Codec,
    FixedIdCodec,
    RegistryError,
    frame,
    frame_id,
    schema_id_of,
    unframe,
)

if TYPE_CHECKING:
    from recurrence_ledger.serde.registry import RegistrySettings


def make_codec(registry: RegistrySettings | None) -> Codec:
    """The codec of a deployment: :data:`FIXED` without a Schema Registry,
    else a ``RegistryCodec`` on it (confluent-kafka's schema_registry is
    imported only then)."""
    if registry is None:
        return FIXED
    from recurrence_ledger.serde.registry import RegistryCodec

    return RegistryCodec(registry)


def encode(schema: str, value: dict, fmt: str = AVRO) -> bytes:
    """:meth:`Codec.encode` of the fixed-id codec."""
    return FIXED.encode(schema, value, fmt)


def decode_value(raw: bytes, expected: tuple[str, ...]) -> dict:
    """:meth:`Codec.decode_value` of the fixed-id codec."""
    return FIXED.decode_value(raw, expected)


def decode_source(logical_topic: str, raw: bytes | None) -> tuple[str, Any]:
    """:meth:`Codec.decode_source` of the fixed-id codec."""
    return FIXED.decode_source(logical_topic, raw)
