"""The stdio server connection: newline framing wrapped around a server session.

A bigger machine wrapping smaller ones: bytes go into ``LineReader``, each
line is decoded with orjson and handed to the ``ServerSession``; a line that is
not JSON, or that exceeds the line limit, is answered with ``-32700`` and
``"id": null`` and the connection goes on (spec/server-obligations.md, "Every
revision").  End of input (``receive_data(b"", now=...)``) starts the session's
drain.  Every payload the session queues already ends in ``\\n``.
"""

from __future__ import annotations

import orjson

from .actions import Action
from .errors import PARSE_ERROR, LocalProtocolError, RemoteProtocolError
from .framing import DEFAULT_MAX_LINE, EndOfInput, LineReader, LineTooLong
from .jsonrpc import parse_error, repeated_error, repeated_member
from .rounds import RoundTable
from .server_session import ServerConfig, ServerSession
from .tasks import TaskStore

__all__ = ["StdioServerConnection"]


class StdioServerConnection:
    """One stdio peer.  Feed it bytes; drain ``next_actions()`` after every call."""

    def __init__(
        self,
        config: ServerConfig,
        *,
        max_line: int = DEFAULT_MAX_LINE,
        rounds: RoundTable | None = None,
        tasks: TaskStore | None = None,
        identity: str = "connection",
    ) -> None:
        """``identity`` names the peer to the application (``RequestContext.identity``) and owns its tasks."""
        self.session = ServerSession(
            config, newline=True, can_push=True, rounds=rounds, tasks=tasks, identity=identity
        )
        self._tasks = tasks
        self._reader = LineReader(max_line)
        self._ended = False

    def receive_data(self, data: bytes, *, now: float) -> None:
        """Bytes from the peer; ``b""`` is the end of input."""
        if self._ended:
            raise LocalProtocolError("receive_data() after end of input")
        session = self.session
        session.advance(now)
        receive_json = session.receive_json
        plain = session._receive_plain if session._plain_ok else None  # receive_json's first try
        loads = orjson.loads
        for event in self._reader.feed_raw(data):
            if type(event) is bytes:  # a line
                # jsonrpc.decode, in line (it runs for every line): JSON, and no member named twice.
                try:
                    obj = loads(event)
                except orjson.JSONDecodeError as exc:
                    session.receive_invalid(parse_error(exc))
                    continue
                if type(obj) is dict:
                    repeated = repeated_member(event, obj)
                    if repeated is not None:
                        session.receive_invalid(repeated_error(repeated))
                        continue
                    if plain is not None and plain(obj):
                        continue
                receive_json(obj, now=now)
            elif isinstance(event, LineTooLong):
                session.receive_invalid(
                    RemoteProtocolError(
                        f"Parse error: a line longer than {event.limit} bytes was discarded; "
                        "send smaller messages or raise transport.maxLine",
                        code=PARSE_ERROR,
                    )
                )
            elif isinstance(event, EndOfInput):
                self._ended = True
                session.receive_eof(now)

    def next_actions(self) -> list[Action]:
        if self._tasks is not None:
            self._tasks.forget_touched()  # one session: its actions are these
        return self.session.next_actions()

    def promote(self, token: int) -> bool:
        return self.session.promote(token)

    def get_timer(self) -> float | None:
        return self.session.get_timer()

    def handle_timer(self, now: float) -> None:
        self.session.handle_timer(now)
