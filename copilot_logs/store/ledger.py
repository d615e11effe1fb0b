"""What was sent where: ``otel --endpoint``'s ledger, so that a second push sends only the
interactions that are new or changed since (docs/otel.md, "Pushing to a collector").

One file per destination in the store folder, ``<hash of the destination>.sent``, framed and
written as an entry is (:mod:`copilot_logs.store.entry`). A ledger that cannot be read is taken
as empty: everything is sent again (same span ids).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import msgspec

from copilot_logs.store.entry import encode, load, named, replace
from copilot_logs.store.trust import private_folder

MAGIC = b"CLSTORE\xa1"
"""The store's family of magic bytes (``CLSTORE``), and a last byte of its own."""
VERSION = 1
MAX_BYTES = 256 << 20


class _Ledger(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    version: int
    destination: str
    sent: dict[str, str]
    """Trace id (hex) -> the digest of what was sent of it (hex)."""


_DECODER = msgspec.msgpack.Decoder(_Ledger)


def path_of(destination: str) -> str:
    return named(destination, ".sent")


def read(destination: str) -> dict[str, str]:
    """What the ledger says was sent to ``destination`` (empty when there is none, or it is not
    one to trust, or it is damaged)."""
    loaded = load(path_of(destination), MAGIC, _DECODER, MAX_BYTES)
    ledger: _Ledger | None = loaded[0] if loaded is not None else None
    if ledger is None or ledger.version != VERSION or ledger.destination != destination:
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
    data = encode(_Ledger(VERSION, destination, merged), magic=MAGIC)
    return replace(Path(path_of(destination)), data, folder)
