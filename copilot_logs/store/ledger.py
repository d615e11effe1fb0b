"""What was sent where: ``otel --endpoint``'s ledger, so that a second push sends only the
interactions that are new or changed since (docs/otel.md, "Pushing to a collector").

One file per destination in the store folder, ``<hash of the destination>.sent``, under the
store's rules (:mod:`copilot_logs.store.trust`, :func:`copilot_logs.store.entry.replace`): the
destination's URL and a digest of each trace sent, behind a header like an entry's. A ledger
that cannot be read is taken as empty: everything is sent again (same span ids).
"""

from __future__ import annotations

import hashlib
import os
import struct
import zlib
from collections.abc import Mapping
from pathlib import Path

import msgspec

from copilot_logs.store.entry import LEDGER_NAME, replace
from copilot_logs.store.trust import open_entry, private_folder, where

MAGIC = b"CLSTORE\xa1"
"""The store's family of magic bytes (``CLSTORE``), and a last byte of its own."""
VERSION = 1
PREFIX = struct.Struct("<8sII")
MAX_BYTES = 256 << 20


class _Ledger(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    version: int
    destination: str
    sent: dict[str, str]
    """Trace id (hex) -> the digest of what was sent of it (hex)."""


_DECODER = msgspec.msgpack.Decoder(_Ledger)
_ENCODER = msgspec.msgpack.Encoder()


__all__ = ["LEDGER_NAME", "MAGIC", "read", "record"]


def path_of(destination: str) -> str:
    name = hashlib.blake2b(destination.encode(), digest_size=16).hexdigest()
    return os.path.join(where(), name + ".sent")


def read(destination: str) -> dict[str, str]:
    """What the ledger says was sent to ``destination`` (empty when there is none, or it is not
    one to trust, or it is damaged)."""
    descriptor = open_entry(path_of(destination))
    if descriptor is None:
        return {}
    try:
        with os.fdopen(descriptor, "rb") as stream:
            data = stream.read(MAX_BYTES + 1)
    except OSError:
        return {}
    if len(data) < PREFIX.size or len(data) > MAX_BYTES:
        return {}
    magic, length, crc = PREFIX.unpack_from(data)
    raw = data[PREFIX.size : PREFIX.size + length]
    if magic != MAGIC or len(raw) != length or zlib.crc32(raw) != crc:
        return {}
    try:
        ledger = _DECODER.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return {}
    if ledger.version != VERSION or ledger.destination != destination:
        return {}
    return dict(ledger.sent)


def record(destination: str, sent: Mapping[str, str]) -> bool:
    """Add ``sent`` to the ledger of ``destination`` (read again just before, so that a push
    running beside this one keeps what it recorded). False when nothing could be written (the
    store is not the user's own, or the disk is full): the next push sends these again."""
    if not sent:
        return True
    folder = private_folder()
    if folder is None:
        return False
    merged = {**read(destination), **sent}
    raw = _ENCODER.encode(_Ledger(VERSION, destination, merged))
    data = PREFIX.pack(MAGIC, len(raw), zlib.crc32(raw)) + raw
    return replace(Path(path_of(destination)), data, folder)
