"""The cursors of the gateway's lists: ``payload.MAC``, signed with a key the caller gives.

A cursor names the list it pages, the offset, and a fingerprint of the list
it was issued for; one that was altered, comes from another list, was issued
by another daemon process or outlived a change of the list is ``-32602``,
and the message says to list again without a cursor (every revision's
server/utilities/pagination: cursors are opaque, and an invalid one is
``-32602``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Iterable
from typing import Final

import orjson

from .errors import INVALID_PARAMS
from .gateway_results import _LIST_METHODS, GatewayError, ListKind

_CURSOR_CONTEXT: Final = b"mcpx gateway cursor v1\x00"


_CURSOR_MAX: Final = 256


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class _Cursors:
    """Mints and reads the gateway's cursors: ``payload.MAC`` under the caller's key."""

    __slots__ = ("_key",)

    def __init__(self, key: bytes) -> None:
        self._key = key

    def _mac(self, payload: str) -> str:
        return _b64(
            hmac.new(self._key, _CURSOR_CONTEXT + payload.encode("ascii"), hashlib.sha256).digest()[:16]
        )

    def mint(self, kind: ListKind, offset: int, fingerprint: str) -> str:
        payload = _b64(orjson.dumps([kind, offset, fingerprint]))
        return f"{payload}.{self._mac(payload)}"

    def read(self, cursor: object, kind: ListKind, fingerprint: str, length: int) -> int | GatewayError:
        """The offset ``cursor`` stands for, or the ``-32602`` that says why it stands for none."""
        method = _LIST_METHODS[kind]
        if cursor is None:
            return 0
        again = f"call {method} without a cursor, then pass each nextCursor it returns unchanged"
        if not isinstance(cursor, str):
            return _cursor_error(f"the cursor must be a string, not {type(cursor).__name__}; {again}", None)
        payload, dot, mac = cursor.partition(".")
        if not dot or len(cursor) > _CURSOR_MAX or not cursor.isascii() or not payload or not mac:
            return _cursor_error(f"this is not a cursor this gateway issued; {again}", cursor)
        if not hmac.compare_digest(mac, self._mac(payload)):
            return _cursor_error(
                "this cursor was not issued by this gateway: it was altered, or issued before mcpx restarted "
                f"(cursors do not outlive the daemon process); {again}",
                cursor,
            )
        try:
            issued_kind, offset, issued_fingerprint = orjson.loads(_unb64(payload))
        except (ValueError, TypeError, binascii.Error, orjson.JSONDecodeError):  # pragma: no cover - MAC'd
            return _cursor_error(f"this is not a cursor this gateway issued; {again}", cursor)
        if issued_kind != kind:
            issued = _LIST_METHODS.get(issued_kind, str(issued_kind))
            return _cursor_error(f"this cursor was issued by {issued}, not {method}; {again}", cursor)
        if issued_fingerprint != fingerprint or not isinstance(offset, int) or not 0 < offset < length:
            return _cursor_error(
                f"the list changed since this cursor was issued (an upstream's catalog changed); {again}",
                cursor,
            )
        return offset


def _cursor_error(reason: str, cursor: str | None) -> GatewayError:
    data = {"cursor": cursor} if cursor is not None and len(cursor) <= _CURSOR_MAX else None
    return GatewayError(code=INVALID_PARAMS, message=f"Invalid params: invalid cursor: {reason}", data=data)


def _fingerprint(keys: Iterable[str]) -> str:
    digest = hashlib.sha256()
    for key in keys:
        digest.update(key.encode("utf-8", "surrogatepass"))
        digest.update(b"\x00")
    return digest.hexdigest()[:16]
