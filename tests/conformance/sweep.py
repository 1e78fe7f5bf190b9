"""The process-wide strict schema sweep used by the conversation suite.

``SWEEP`` validates every frame a test peer receives from mcpx.  When the
official schemas are not where the tests look for them (``$MCPX_SCHEMAS`` or
``../shared/mcp-schemas``), ``SWEEP`` is a no-op that records why, and the
end-of-run summary says so instead of reporting counts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import orjson

from tests.conftest import schemas_dir
from tests.schema_sweep import SchemaSweep


class _Disabled:
    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.counts: Counter[str] = Counter()
        self.exemptions: Counter[str] = Counter()
        self.violations: Counter[str] = Counter()

    def validate_sent(self, frame: dict[str, Any], revision: str, method: str | None) -> None:
        return None

    def validate_client_sent(self, frame: dict[str, Any], revision: str, method: str | None) -> None:
        return None


_root = schemas_dir()
SWEEP: SchemaSweep | _Disabled = (
    SchemaSweep(_root)
    if (_root / "2026-07-28" / "schema.json").is_file()
    else _Disabled(f"official schemas not found at {_root}; set MCPX_SCHEMAS to the mcp-schemas directory")
)


def sweep_client_frames() -> Callable[[], None]:
    """Validate every frame mcpx's client core sends, in every test, until the returned undo is called.

    ``ClientSession.next_actions`` is where every frame leaves the client
    core, whatever driver carries it; the wrapper checks each ``Send`` against
    the revision the session speaks (the offered one for ``initialize``) and
    remembers which server request a later answer belongs to.
    """
    import weakref

    from mcpx.core.actions import Send
    from mcpx.core.client_session import ClientSession, ServerRequest

    original = ClientSession.next_actions
    asked: weakref.WeakKeyDictionary[ClientSession, dict[Any, str]] = weakref.WeakKeyDictionary()

    def next_actions(self: ClientSession) -> list[Any]:
        actions = original(self)
        pending = asked.setdefault(self, {})
        for action in actions:
            if isinstance(action, ServerRequest):
                pending[action.request_id] = action.method
            elif isinstance(action, Send):
                frame = orjson.loads(action.payload)
                if not isinstance(frame, dict):
                    continue
                revision = self.revision
                if revision is None:  # before the handshake: the frame is initialize itself
                    revision = (frame.get("params") or {}).get("protocolVersion")
                # A result no ServerRequest announced is the core's own answer to ping.
                method = None if "method" in frame else pending.pop(frame.get("id"), "ping")
                SWEEP.validate_client_sent(frame, str(revision), method)
        return actions

    ClientSession.next_actions = next_actions  # type: ignore[method-assign]

    def undo() -> None:
        ClientSession.next_actions = original  # type: ignore[method-assign]

    return undo
