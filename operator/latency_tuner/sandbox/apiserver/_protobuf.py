"""Just enough of Kubernetes' protobuf encoding to read what kubectl sends as protobuf.

kubectl's typed commands (`kubectl create namespace`) send built-in objects as
`application/vnd.kubernetes.protobuf`: the 4 bytes `k8s\\0`, then a `runtime.Unknown` message
(1: TypeMeta {1: apiVersion, 2: kind}, 2: the object's own bytes). Of the object this reads the
ObjectMeta (field 1: name, generateName, namespace, labels, annotations), which is all such a
create carries for the kinds listed in ``READABLE``; anything else is refused as 415, as a
server that does not speak protobuf for it would.
"""

from __future__ import annotations

from typing import Any

MAGIC = b"k8s\x00"
READABLE = frozenset({"Namespace"})


class NotReadable(ValueError):
    """Not a protobuf body this module can read."""


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data):
            raise NotReadable("truncated varint")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


def fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) of one message; length-delimited values stay bytes."""
    out: list[tuple[int, int | bytes]] = []
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _varint(data, at)
            out.append((number, value))
        elif wire == 2:
            size, at = _varint(data, at)
            if at + size > len(data):
                raise NotReadable("truncated field")
            out.append((number, data[at : at + size]))
            at += size
        elif wire in (1, 5):
            at += 8 if wire == 1 else 4
        else:
            raise NotReadable(f"wire type {wire}")
    return out


def _text(value: int | bytes) -> str:
    if not isinstance(value, bytes):
        raise NotReadable("expected a string")
    return value.decode("utf-8")


def _map(entries: list[bytes]) -> dict[str, str]:
    out = {}
    for entry in entries:
        parts = dict(fields(entry))
        out[_text(parts.get(1, b""))] = _text(parts.get(2, b""))
    return out


def _object_meta(data: bytes) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    labels: list[bytes] = []
    annotations: list[bytes] = []
    for number, value in fields(data):
        if number in (1, 2, 3):
            meta[{1: "name", 2: "generateName", 3: "namespace"}[number]] = _text(value)
        elif number == 11 and isinstance(value, bytes):
            labels.append(value)
        elif number == 12 and isinstance(value, bytes):
            annotations.append(value)
    if labels:
        meta["labels"] = _map(labels)
    if annotations:
        meta["annotations"] = _map(annotations)
    return meta


def decode(body: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf-encoded object of a ``READABLE`` kind."""
    if not body.startswith(MAGIC):
        raise NotReadable("no k8s protobuf envelope")
    envelope = dict(fields(body[len(MAGIC) :]))
    type_meta = envelope.get(1)
    raw = envelope.get(2)
    if not isinstance(type_meta, bytes) or not isinstance(raw, bytes):
        raise NotReadable("no type or object in the envelope")
    types = dict(fields(type_meta))
    api_version, kind = _text(types.get(1, b"")), _text(types.get(2, b""))
    if kind not in READABLE:
        raise NotReadable(f"{kind} is not read from protobuf here")
    metadata = next((v for n, v in fields(raw) if n == 1 and isinstance(v, bytes)), b"")
    return {"apiVersion": api_version, "kind": kind, "metadata": _object_meta(metadata)}
