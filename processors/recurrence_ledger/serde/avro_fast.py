"""Avro bodies of our own schemas, written and read by code generated once
per schema — the fast path beside fastavro (``recurrence_ledger.serde.avro``).

fastavro's schemaless writer and reader interpret the parsed schema for
every record (a dict lookup per field and type, union resolution, the
strict field check): 20–50 µs for one of our 300-byte output records, and
~14 µs for a Task Outcome SourceEvent, on the 2-core VM (BENCHMARKS.md,
"Kafka worker, per stage"). Here each record schema is turned once into a
straight-line Python function of its fields (Avro 1.11 binary encoding:
zig-zag varint longs, length-prefixed UTF-8 strings, enums and union
branches as their index, arrays and maps as one block then 0, doubles as
8 little-endian bytes), the same bytes fastavro writes.

Only values the generated code handles exactly are done here: the exact
field set of each record (fastavro's ``strict=True``), exact Python types
(``str``, ``int`` that is not ``bool``, ``float`` or ``int`` for doubles,
``list``, ``dict``, ``None``), longs in the signed 64-bit range, and for
reading, a body that ends exactly at the record's end. Anything else
raises, and ``serde.avro`` hands the value to fastavro, which writes or
reads it or raises its own error — so errors, and the dead-letter reasons
they become (contract §9), are fastavro's as before. Schemas with a shape
not generated here (fixed, bytes, float, int, recursive types; for writing,
a union other than ``["null", T]``, whose branch fastavro chooses by
trying each) are left to fastavro altogether (:func:`writer` / :func:`reader`
return None). tests/serde/test_avro_fast.py holds both
paths byte for byte against each other.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

#: Varint bytes of the zig-zag encoding of 0 … SMALL_LONGS - 1 (lengths, counts, small longs).
SMALL_LONGS = 4096
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_DOUBLE = struct.Struct("<d")
_PRIMITIVES = ("null", "boolean", "long", "double", "string")


class Unsupported(Exception):
    """A schema shape this module does not generate code for."""


def _zigzag_varint(number: int) -> bytes:
    if not INT64_MIN <= number <= INT64_MAX:
        raise OverflowError("long out of range")
    value = (number << 1) ^ (number >> 63)
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SMALL = [_zigzag_varint(number) for number in range(SMALL_LONGS)]


def write_long(number: int) -> bytes:
    """The Avro encoding of a long (``int``, not ``bool``). Raises TypeError
    / OverflowError for anything else."""
    if type(number) is not int:
        raise TypeError("not an int")
    if 0 <= number < SMALL_LONGS:
        return _SMALL[number]
    return _zigzag_varint(number)


def read_long(data: bytes, pos: int) -> tuple[int, int]:
    """``(long, next position)`` of the varint at ``pos``. Raises IndexError
    on a truncated body, ValueError on a varint longer than 10 bytes or
    outside the signed 64-bit range."""
    byte = data[pos]
    pos += 1
    value = byte & 0x7F
    shift = 7
    while byte & 0x80:
        if shift > 63:
            raise ValueError("varint too long")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
    number = (value >> 1) ^ -(value & 1)
    if not INT64_MIN <= number <= INT64_MAX:  # a 10-byte varint past 64 bits: fastavro decides
        raise ValueError("long out of range")
    return number, pos


class _Source:
    """Generated source: lines with indentation and fresh variable names."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.names: dict[str, Any] = {}
        self.counter = 0
        self.constants: dict[str, Any] = {}

    def var(self, prefix: str = "v") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def constant(self, value: Any) -> str:
        name = f"K{len(self.constants)}"
        self.constants[name] = value
        return name

    def add(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)


def _resolve(avro_type: Any, named: dict[str, dict], depth: int) -> Any:
    if depth > 20:
        raise Unsupported("nesting too deep (recursive type?)")
    if isinstance(avro_type, str):
        if avro_type in _PRIMITIVES:
            return avro_type
        if avro_type in named:
            return named[avro_type]
        raise Unsupported(f"type {avro_type!r}")
    if isinstance(avro_type, dict) and avro_type.get("type") in ("record", "enum"):
        named[avro_type["name"]] = avro_type
        return avro_type
    if isinstance(avro_type, dict) and avro_type.get("type") in _PRIMITIVES and len(avro_type) == 1:
        return avro_type["type"]
    return avro_type


def _write(src: _Source, avro_type: Any, x: str, depth: int, named: dict[str, dict], nesting: int = 0) -> None:
    """Lines appending the encoding of local ``x`` (of ``avro_type``) to ``a``."""
    t = _resolve(avro_type, named, nesting)
    if t == "null":
        src.add(depth, f"if {x} is not None: raise TypeError")
    elif t == "boolean":
        src.add(depth, f"if {x} is True: a(b'\\x01')")
        src.add(depth, f"elif {x} is False: a(b'\\x00')")
        src.add(depth, "else: raise TypeError")
    elif t == "long":
        src.add(depth, f"a(S[{x}] if type({x}) is int and 0 <= {x} < {SMALL_LONGS} else L({x}))")
    elif t == "double":
        src.add(depth, f"if type({x}) is not float and type({x}) is not int: raise TypeError")
        src.add(depth, f"a(D({x}))")
    elif t == "string":
        encoded = src.var("s")
        src.add(depth, f"if type({x}) is not str: raise TypeError")
        src.add(depth, f"{encoded} = {x}.encode()")
        src.add(depth, f"a(S[len({encoded})] if len({encoded}) < {SMALL_LONGS} else L(len({encoded}))); a({encoded})")
    elif isinstance(t, list):
        if len(t) != 2 or t[0] != "null":
            raise Unsupported(f"union {t!r}")
        src.add(depth, f"if {x} is None: a(b'\\x00')")
        src.add(depth, "else:")
        src.add(depth + 1, "a(b'\\x02')")
        _write(src, t[1], x, depth + 1, named, nesting + 1)
    elif isinstance(t, dict) and t.get("type") == "enum":
        table = src.constant({symbol: _SMALL[index] for index, symbol in enumerate(t["symbols"])})
        src.add(depth, f"a({table}[{x}])")
    elif isinstance(t, dict) and t.get("type") == "record":
        fields = t["fields"]
        src.add(depth, f"if type({x}) is not dict or len({x}) != {len(fields)}: raise TypeError")
        for field in fields:
            item = src.var()
            src.add(depth, f"{item} = {x}[{field['name']!r}]")
            _write(src, field["type"], item, depth, named, nesting + 1)
    elif isinstance(t, dict) and t.get("type") in ("array", "map"):
        items, key = src.var(), src.var("k")
        src.add(depth, f"if type({x}) is not {'list' if t['type'] == 'array' else 'dict'}: raise TypeError")
        src.add(depth, f"if {x}:")
        src.add(depth + 1, f"a(L(len({x})))")
        if t["type"] == "array":
            src.add(depth + 1, f"for {items} in {x}:")
            _write(src, t["items"], items, depth + 2, named, nesting + 1)
        else:
            src.add(depth + 1, f"for {key}, {items} in {x}.items():")
            _write(src, "string", key, depth + 2, named, nesting + 1)
            _write(src, t["values"], items, depth + 2, named, nesting + 1)
        src.add(depth, "a(b'\\x00')")
    else:
        raise Unsupported(f"type {t!r}")


def _read_long(src: _Source, target: str, depth: int) -> None:
    """Lines reading a long into ``target``: one-byte varints inline."""
    src.add(depth, f"{target} = d[p]")
    src.add(depth, f"if {target} < 128: p += 1; {target} = ({target} >> 1) ^ -({target} & 1)")
    src.add(depth, f"else: {target}, p = R(d, p)")


def _read(src: _Source, avro_type: Any, target: str, depth: int, named: dict[str, dict], nesting: int = 0) -> None:
    """Lines reading one value of ``avro_type`` at ``p`` of ``d`` into local ``target``."""
    t = _resolve(avro_type, named, nesting)
    if t == "null":
        src.add(depth, f"{target} = None")
    elif t == "boolean":
        flag = src.var("b")
        src.add(depth, f"{flag} = d[p]; p += 1")
        src.add(depth, f"if {flag} > 1: raise ValueError")
        src.add(depth, f"{target} = {flag} == 1")
    elif t == "long":
        _read_long(src, target, depth)
    elif t == "double":
        src.add(depth, "if p + 8 > n: raise ValueError")
        src.add(depth, f"{target} = U(d, p)[0]; p += 8")
    elif t == "string":
        size = src.var("m")
        _read_long(src, size, depth)
        src.add(depth, f"if {size} < 0 or p + {size} > n: raise ValueError")
        src.add(depth, f"{target} = d[p:p + {size}].decode(); p += {size}")
    elif isinstance(t, list):  # any union: the branch its index names
        branch = src.var("u")
        _read_long(src, branch, depth)
        for index, option in enumerate(t):
            src.add(depth, f"{'if' if index == 0 else 'elif'} {branch} == {index}:")
            _read(src, option, target, depth + 1, named, nesting + 1)
        src.add(depth, "else: raise ValueError")
    elif isinstance(t, dict) and t.get("type") == "enum":
        index = src.var("e")
        symbols = src.constant(tuple(t["symbols"]))
        _read_long(src, index, depth)
        src.add(depth, f"if {index} < 0: raise ValueError")
        src.add(depth, f"{target} = {symbols}[{index}]")
    elif isinstance(t, dict) and t.get("type") == "record":
        values = []
        for field in t["fields"]:
            item = src.var()
            _read(src, field["type"], item, depth, named, nesting + 1)
            values.append(f"{field['name']!r}: {item}")
        src.add(depth, f"{target} = {{{', '.join(values)}}}")
    elif isinstance(t, dict) and t.get("type") in ("array", "map"):
        count, item, key, block = src.var("c"), src.var(), src.var("k"), src.var("i")
        src.add(depth, f"{target} = {'[]' if t['type'] == 'array' else '{}'}")
        src.add(depth, f"{count}, p = R(d, p)")
        src.add(depth, f"while {count}:")
        src.add(depth + 1, f"if {count} < 0:")  # a block with its byte size: skip the size
        src.add(depth + 2, f"{count} = -{count}; _, p = R(d, p)")
        src.add(depth + 1, f"for {block} in range({count}):")
        if t["type"] == "array":
            _read(src, t["items"], item, depth + 2, named, nesting + 1)
            src.add(depth + 2, f"{target}.append({item})")
        else:
            _read(src, "string", key, depth + 2, named, nesting + 1)
            _read(src, t["values"], item, depth + 2, named, nesting + 1)
            src.add(depth + 2, f"{target}[{key}] = {item}")
        src.add(depth + 1, f"{count}, p = R(d, p)")
    else:
        raise Unsupported(f"type {t!r}")


def _compile(src: _Source, name: str) -> Callable:
    namespace: dict[str, Any] = {"L": write_long, "S": _SMALL, "D": _DOUBLE.pack, "U": _DOUBLE.unpack_from, "R": read_long, **src.constants}
    exec(compile("\n".join(src.lines), f"<avro_fast {name}>", "exec"), namespace)  # noqa: S102 - our own generated source
    return namespace["generated"]


def _generated(schema: dict, head: list[str], body: Callable, tail: list[str]) -> Callable | None:
    """The function ``generated`` made from ``head`` (its def line, then its
    first lines), the lines ``body`` adds for ``schema`` into ``v0`` and
    ``tail``; None when ``body`` raises Unsupported."""
    src = _Source()
    src.add(0, head[0])
    for line in head[1:]:
        src.add(1, line)
    try:
        body(src, schema, "v0", 1, {})
    except Unsupported:
        return None
    for line in tail:
        src.add(1, line)
    return _compile(src, schema.get("name", "record"))


def writer(schema: dict) -> Callable[[dict], bytes] | None:
    """A function writing the Avro body of a record of ``schema`` (one
    self-contained schema, as ``avro.schema_json`` gives it, parsed), or
    None when the schema has a shape not generated here. The function
    raises (TypeError, KeyError, OverflowError, …) for a value it does not
    write exactly: give that value to fastavro."""
    return _generated(schema, ["def generated(v0):", "out = []; a = out.append"], _write, ["return b''.join(out)"])


def reader(schema: dict) -> Callable[[bytes], dict] | None:
    """A function reading a whole Avro body written with ``schema`` (as for
    :func:`writer`) into the dict fastavro would return, or None for a shape
    not generated here. The function raises (IndexError, ValueError,
    UnicodeDecodeError, …) for a body it cannot read to its exact end:
    give that body to fastavro."""
    return _generated(schema, ["def generated(d):", "p = 0; n = len(d)"], _read,
                      ["if p != n: raise ValueError('trailing bytes')", "return v0"])
