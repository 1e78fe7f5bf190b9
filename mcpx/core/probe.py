"""The era probe: which era an upstream MCP server speaks, found by asking, and remembered.

mcpx as a client meets servers of both eras (2026-07-28 basic/versioning and
server/discover; the transport pages of every revision).  ``EraProbe`` finds
out which one a server is, in the order the 2026-07-28 versioning page gives a
dual-era client, and hands over a settled connection; ``EraCache`` remembers
the answer per server configuration so the probe costs one round trip per
configuration, not one per start.  ``spec/era-probe.md`` is the prose and the
table of answers; this docstring is the API.

Rules
-----
* **Modern first.**  The first request is ``server/discover`` as the most
  preferred modern revision, with the full 2026-07-28 ``params._meta``
  (version, client capabilities, client info).  Over HTTP it is a POST with
  ``MCP-Protocol-Version`` and ``Mcp-Method``; the answer's status, content
  type and body are all read, the body of a 400 included.
* **A recognised modern answer keeps the modern era.**  A DiscoverResult
  whose ``supportedVersions`` (never ``protocolVersions``) lists the version
  sent is the modern era.  A DiscoverResult or a ``-32022`` whose list names
  another modern revision mcpx speaks is retried with it; each revision is
  tried at most once.  ``-32020``, and ``-32021`` with
  ``data.requiredCapabilities``, are modern refusals: the era is modern, the
  capabilities are not known yet.  A list that names only legacy revisions
  mcpx speaks sends the probe to ``initialize`` offering those.
* **Anything else is legacy**, never keyed to one error code: ``-32601``,
  ``-32602``, any other error, a result without a ``supportedVersions`` list,
  silence for ``timeout`` seconds, a line or body that is not JSON-RPC, an
  HTML 404, a 405, a 400 without a recognisable body, a closed connection.
  Over stdio a server whose process ended is started again (``Reconnect``)
  before ``initialize``.  Only 401, 403 and 407 stop the probe at once: they
  are about credentials, not eras.
* **Legacy negotiates once.**  ``initialize`` offers the most preferred legacy
  revision (newest first by default) and accepts the server's counter-offer
  when mcpx speaks it; an error whose ``data.supported`` lists another
  revision mcpx speaks is retried with it (a modern one sends the probe back
  to ``server/discover``).  On success the probe sends
  ``notifications/initialized`` itself (``send_initialized``), so the
  connection it hands over is ready.
* **HTTP falls back once more.**  When ``initialize`` over Streamable HTTP
  gets no JSON-RPC answer (a 404, a 405, an HTML page, a dropped connection),
  or a JSON-RPC error with 400/404/405, the probe GETs ``sse_path`` for a
  2024-11-05 HTTP+SSE stream and ends at its ``endpoint`` event, leaving
  that stream open for the caller: ``era="legacy-sse"``.  The endpoint is
  resolved against ``sse_path`` and must stay on its origin
  (``sse_client.resolve_endpoint``).
* **A cached era is tried first** (``cached=``): legacy starts at
  ``initialize``, legacy-sse at the GET, modern at ``server/discover`` with
  the cached revision.  When the cached path fails in a way that could mean
  "wrong era" (refused, silent, closed, not Streamable HTTP), the probe starts
  afresh, modern first, once.  The outcome says whether the entry was
  ``confirmed`` or ``stale``.
* **Bounded.**  At most ``max_requests`` requests and ``max_restarts``
  process restarts; a timer is armed whenever the probe waits; a body or SSE
  event larger than ``max_body`` is an unusable answer, not a growing buffer.

Theory of operation
-------------------
Every answer is first *judged* into a ``_Verdict`` (with the version or
offer it implies and a line for the trace); ``_TRANSITIONS`` maps
(state, verdict) to (effect, next state).  A missing pair is a bug, never a
peer's doing.  Three guards sit between the judgement and the table: a
failure of the cached path becomes ``STALE`` (start afresh), an effect that
would exceed a budget becomes ``GIVE_UP``, and a step to ``initialize`` with
no legacy revision left to offer becomes ``NO_LEGACY``.

API
---
``EraProbe(config, transport="stdio"|"http", path=..., sse_path=..., cached=...)``
    ``start(now)`` first; then ``receive(event, now)`` for each event and
    ``handle_timer(now)`` once ``get_timer()``'s deadline has passed.  After
    every call drain ``next_actions()`` and carry them out in order.  The
    last action is ``ProbeDone`` or ``ProbeFailed`` (also ``outcome``);
    inputs after it are ignored.
Actions (what the driver does)
    ``SendMessage(payload)`` — write one line to the server's stdin (append
    the newline).  ``HttpRequest(token, method, path, headers, body)`` — send
    it (adding the server's auth headers) and report the answer under
    ``token``.  ``OpenSse(token, path, headers)`` — GET an event stream and
    report it under ``token`` as it arrives.  ``CloseResponse(token)`` — the
    probe no longer reads that answer: close it.  ``Reconnect(reason)`` —
    stdio: the server's process ended; start it again before the next
    action.  ``ProbeDone`` / ``ProbeFailed`` — the outcome, with the trace.
Events (what the driver reports)
    ``LineReceived(line)`` — one line from the server's stdout, undecoded
    (or ``MessageReceived(message)`` when the driver decoded it).
    ``HttpAnswered(token, status, headers, body, complete)`` — an answer's
    head and the body so far; ``complete=False`` means the rest comes as
    ``HttpBody(token, data)``, ``data=b""`` at its end (always so for an
    event stream the driver does not buffer).  ``TransportClosed(reason,
    token)`` — stdio: the server's stdout ended; HTTP: the connection
    carrying ``token`` closed before a complete answer.

Request ids are ``config.id_prefix`` + a counter (strings, so they never
meet the integer ids a client session allocates); HTTP tokens are integers
from 1.  Time is whatever clock the caller passes as ``now`` (monotonic is
right); the cache's ``now`` is wall-clock, because its file outlives the
process.

Layers: the module's face is ``EraProbe`` with its table and its effects;
the rest of the probe lives beside it, one module per subject:

=================== =======================================================
``probe_events``    ``ProbeConfig``, the events the driver reports and the
                    actions it carries out, ``ProbeDone``/``ProbeFailed``
``probe_cache``     ``EraCache``: what is remembered of a probe, per server
                    configuration
``probe_base``      the probe's states, verdicts and every field
                    (``_ProbeBase.__init__``), and its trace
``probe_judging``   an answer read as a verdict, and the offer it implies
``probe_reading``   the driver's events read into answers (stdio lines,
                    HTTP heads and bodies, event streams)
``probe``           ``EraProbe``: the caller's side, the table, the effects
=================== =======================================================

Each machine layer subclasses the one below it; a layer that calls a
method of a later one declares it under ``TYPE_CHECKING``.  Every public
name is importable from this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any, Final

import orjson

from .downgrade import downgrade
from .errors import LocalProtocolError
from .probe_base import _S, _V, ProbeState, _Decision, _Verdict, _Wait
from .probe_cache import EraCache, EraEntry
from .probe_events import (
    CloseResponse,
    EraName,
    Headers,
    HttpAnswered,
    HttpBody,
    HttpRequest,
    LineReceived,
    MessageReceived,
    OpenSse,
    ProbeAction,
    ProbeConfig,
    ProbeDone,
    ProbeEvent,
    ProbeFailed,
    Reconnect,
    SendMessage,
    TransportClosed,
)
from .probe_judging import _short, _versions
from .probe_reading import _Reading
from .revisions import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    Revision,
)

__all__ = [
    "CloseResponse",
    "EraCache",
    "EraEntry",
    "EraName",
    "EraProbe",
    "HttpAnswered",
    "HttpBody",
    "HttpRequest",
    "LineReceived",
    "MessageReceived",
    "OpenSse",
    "ProbeAction",
    "ProbeConfig",
    "ProbeDone",
    "ProbeEvent",
    "ProbeFailed",
    "ProbeState",
    "Reconnect",
    "SendMessage",
    "TransportClosed",
]


_R25B: Final = Revision.V2025_06_18


_TRANSITIONS: Final[Mapping[tuple[ProbeState, _Verdict], tuple[str, ProbeState]]] = MappingProxyType(
    {
        (_S.IDLE, _V.START_MODERN): ("_send_discover", _S.DISCOVERING),
        (_S.IDLE, _V.START_LEGACY): ("_send_initialize", _S.INITIALIZING),
        (_S.IDLE, _V.START_SSE): ("_open_sse", _S.OPENING_SSE),
        (_S.DISCOVERING, _V.DISCOVERED): ("_done_modern", _S.DONE),
        (_S.DISCOVERING, _V.OTHER_MODERN): ("_send_discover", _S.DISCOVERING),
        (_S.DISCOVERING, _V.MODERN_REFUSAL): ("_done_modern", _S.DONE),
        (_S.DISCOVERING, _V.NO_COMMON_VERSION): ("_fail", _S.FAILED),
        (_S.DISCOVERING, _V.NOT_MODERN): ("_send_initialize", _S.INITIALIZING),
        (_S.DISCOVERING, _V.NO_ANSWER): ("_send_initialize", _S.INITIALIZING),
        (_S.DISCOVERING, _V.CLOSED): ("_restart_then_initialize", _S.INITIALIZING),
        (_S.DISCOVERING, _V.AUTH): ("_fail", _S.FAILED),
        (_S.DISCOVERING, _V.NO_LEGACY): ("_fail", _S.FAILED),
        (_S.DISCOVERING, _V.GIVE_UP): ("_fail", _S.FAILED),
        (_S.INITIALIZING, _V.INITIALIZED): ("_done_legacy", _S.DONE),
        (_S.INITIALIZING, _V.OTHER_LEGACY): ("_send_initialize", _S.INITIALIZING),
        (_S.INITIALIZING, _V.MODERN_HINT): ("_send_discover", _S.DISCOVERING),
        (_S.INITIALIZING, _V.REFUSED): ("_fail", _S.FAILED),
        (_S.INITIALIZING, _V.NO_ANSWER): ("_fail", _S.FAILED),
        (_S.INITIALIZING, _V.CLOSED): ("_fail", _S.FAILED),
        (_S.INITIALIZING, _V.NOT_STREAMABLE): ("_open_sse", _S.OPENING_SSE),
        (_S.INITIALIZING, _V.AUTH): ("_fail", _S.FAILED),
        (_S.INITIALIZING, _V.STALE): ("_start_fresh", _S.DISCOVERING),
        (_S.INITIALIZING, _V.NO_LEGACY): ("_fail", _S.FAILED),
        (_S.INITIALIZING, _V.GIVE_UP): ("_fail", _S.FAILED),
        (_S.OPENING_SSE, _V.ENDPOINT): ("_done_sse", _S.DONE),
        (_S.OPENING_SSE, _V.NO_SSE): ("_fail", _S.FAILED),
        (_S.OPENING_SSE, _V.NO_ANSWER): ("_fail", _S.FAILED),
        (_S.OPENING_SSE, _V.AUTH): ("_fail", _S.FAILED),
        (_S.OPENING_SSE, _V.STALE): ("_start_fresh", _S.DISCOVERING),
        (_S.OPENING_SSE, _V.GIVE_UP): ("_fail", _S.FAILED),
    }
)
"""(state, verdict) → (effect, next state); spec/era-probe.md holds ``transition_table()``."""


def transition_table() -> str:
    """``_TRANSITIONS`` as the Markdown table in spec/era-probe.md (a test keeps the two equal)."""
    lines = ["| State | Answer judged as | Effect | Next state |", "| --- | --- | --- | --- |"]
    for (state, verdict), (effect, new_state) in _TRANSITIONS.items():
        lines.append(f"| {state.value} | {verdict.value} | `{effect.lstrip('_')}` | {new_state.value} |")
    return "\n".join(lines) + "\n"


# Failures of a cached path that may mean "wrong era": start afresh instead.
_CACHE_FAILURES: Final = frozenset({_V.REFUSED, _V.NO_ANSWER, _V.CLOSED, _V.NOT_STREAMABLE, _V.NO_SSE})


_SENDING: Final = frozenset(
    {"_send_discover", "_send_initialize", "_restart_then_initialize", "_open_sse", "_start_fresh"}
)


_NEEDS_LEGACY: Final = frozenset({"_send_initialize", "_restart_then_initialize"})


class EraProbe(_Reading):
    """One probe of one server; see the module docstring for the rules and the API."""

    @property
    def state(self) -> ProbeState:
        return self._state

    @property
    def outcome(self) -> ProbeDone | ProbeFailed | None:
        return self._outcome

    @property
    def trace(self) -> tuple[str, ...]:
        return tuple(self._trace)

    def next_actions(self) -> list[ProbeAction]:
        """Everything queued since the last call, in order.  Call after every input."""
        actions, self._actions = self._actions, []
        return actions

    def get_timer(self) -> float | None:
        """When ``handle_timer`` must next be called; ``None`` only before ``start`` and after the outcome."""
        return self._wait.deadline if self._wait is not None else None

    def start(self, now: float) -> None:
        """Send the first request (or the first step of the cached path).  Drain actions after this."""
        if self._state is not ProbeState.IDLE:
            raise LocalProtocolError("start() is called once")
        self._now = now
        self._decide(self._first_step())

    def receive(self, event: ProbeEvent, now: float) -> None:
        """Feed what the driver saw.  Drain actions after this."""
        if self._state is ProbeState.IDLE:
            raise LocalProtocolError("call start() before feeding events")
        stdio_event = isinstance(event, MessageReceived | LineReceived)
        if stdio_event != (self.transport == "stdio") and not isinstance(event, TransportClosed):
            raise LocalProtocolError(f"{type(event).__name__} is not an event of a {self.transport} probe")
        if self._outcome is not None:
            return  # late answers, e.g. to notifications/initialized: nothing waits for them
        self._now = now
        if isinstance(event, LineReceived):
            try:
                value = orjson.loads(event.line)
            except orjson.JSONDecodeError:
                self._note(f"recv a line that is not JSON, ignored: {_short(event.line)}")
                return
            self._stdio_value(value)
        elif isinstance(event, MessageReceived):
            self._stdio_value(event.message)
        elif isinstance(event, HttpAnswered):
            self._http_head(event)
        elif isinstance(event, HttpBody):
            self._http_body(event)
        else:
            self._transport_closed(event)

    def handle_timer(self, now: float) -> None:
        """Call once ``get_timer()``'s deadline has passed.  Drain actions after this."""
        wait = self._wait
        if wait is None or now < wait.deadline:
            return
        self._now = now
        self._heard[wait.what] = f"no answer within {wait.limit:g}s"
        if wait.what == "server/discover" and self._last_discover is not None:
            self._silent_modern.add(self._last_discover)
        self._decide(
            _Decision(
                verdict=_V.NO_ANSWER,
                note=f"recv nothing for {wait.what} within {wait.limit:g}s",
            )
        )

    def _first_step(self) -> _Decision:
        cached, config = self.cached, self.config
        if cached is not None:
            usable = cached.era != "legacy-sse" or self.transport == "http"
            if cached.revision is not None and cached.revision not in config.revisions:
                usable = False
            if cached.era == "legacy-sse" and not config.legacy:
                usable = False
            if usable:
                self._on_cache = True
                where = f"MCP {cached.revision}" if cached.revision else "the HTTP+SSE transport"
                note = f"cache: this server was {cached.era} ({where}); trying that first"
                if cached.era == "modern":
                    return _Decision(verdict=_V.START_MODERN, note=note, version=cached.revision)
                if cached.era == "legacy":
                    return _Decision(verdict=_V.START_LEGACY, note=note)
                return _Decision(verdict=_V.START_SSE, note=note)
            self._note(f"cache: the entry ({cached.era}, {cached.revision}) does not fit this probe; ignored")
        if config.modern:
            return _Decision(verdict=_V.START_MODERN, note="start: modern first", version=config.modern[0])
        # ProbeConfig refuses an empty preference list, so without modern there is legacy
        return _Decision(verdict=_V.START_LEGACY, note="start: mcpx is configured for legacy revisions only")

    def _decide(self, decision: _Decision) -> None:
        verdict = decision.verdict
        if (
            self._on_cache
            and verdict in _CACHE_FAILURES
            and self._state in (_S.INITIALIZING, _S.OPENING_SSE)
            and self.config.modern
        ):
            verdict = _V.STALE
        effect, new_state = self._lookup(verdict)
        if effect in _SENDING and self._requests >= self.config.max_requests:
            verdict = _V.GIVE_UP
            effect, new_state = self._lookup(verdict)
        elif effect in _NEEDS_LEGACY and self._legacy_offer(decision) is None:
            verdict = _V.NO_LEGACY
            effect, new_state = self._lookup(verdict)
        elif (effect == "_restart_then_initialize" or (effect == "_start_fresh" and self._closed)) and (
            self._restarts >= self.config.max_restarts
        ):
            verdict = _V.GIVE_UP
            effect, new_state = self._lookup(verdict)
        self._note(decision.note)
        self._end_wait(keep_open=verdict is _V.ENDPOINT)
        if new_state is not self._state and self._state is not _S.IDLE:
            self._on_cache = False  # the path has left the cached era
        self._state = new_state
        getattr(self, effect)(decision, verdict)

    def _lookup(self, verdict: _Verdict) -> tuple[str, ProbeState]:
        try:
            return _TRANSITIONS[(self._state, verdict)]
        except KeyError:  # the judges only produce verdicts the table has; a miss is a bug here
            raise LocalProtocolError(
                f"no transition for {verdict.name} in state {self._state.value}"
            ) from None

    def _end_wait(self, *, keep_open: bool) -> None:
        wait, self._wait = self._wait, None
        if wait is not None and wait.token is not None and not wait.complete and not keep_open:
            self._actions.append(CloseResponse(token=wait.token))

    def _next_id(self) -> str:
        return f"{self.config.id_prefix}{next(self._ids)}"

    def _limit(self, what: str) -> float:
        """How long the probe waits for the answer to ``what``.

        ``timeout`` (the daemon's ``pool.startTimeout``), except for
        ``server/discover`` on stdio: a legacy server may ignore a method it
        does not know (MCP 2025-11-25 basic/lifecycle has no such method), so
        after ``discover_silence`` the probe offers ``initialize`` instead.  A
        server that is only slow to start loses nothing: it reads both
        requests once it is up, and its answer to ``initialize`` (a legacy or
        dual-era server's session, or a modern-only server's refusal, after
        which ``server/discover`` is tried once more) settles the era.
        """
        if what == "server/discover" and self.transport == "stdio":
            return min(self.config.timeout, self.config.discover_silence)
        return self.config.timeout

    def _send_discover(self, decision: _Decision, verdict: _Verdict) -> None:
        version = decision.version
        if version is None or (version in self._tried_modern and version not in self._silent_modern):
            version = next(r for r in self.config.modern if r not in self._tried_modern)
        self._silent_modern.discard(version)  # one more try at most
        self._tried_modern.add(version)
        self._last_discover = version
        self._requests += 1
        meta = {
            META_PROTOCOL_VERSION: str(version),
            META_CLIENT_CAPABILITIES: downgrade(self.config.capabilities, "ClientCapabilities", version),
            META_CLIENT_INFO: downgrade(self.config.client_info, "Implementation", version),
        }
        request_id = self._next_id()
        message = {"jsonrpc": "2.0", "id": request_id, "method": "server/discover", "params": {"_meta": meta}}
        wait = _Wait(
            what="server/discover",
            deadline=self._now + self._limit("server/discover"),
            limit=self._limit("server/discover"),
            request_id=request_id,
            version=version,
        )
        limit = f"wait up to {wait.limit:g}s"
        if self.transport == "stdio":
            self._actions.append(SendMessage(payload=orjson.dumps(message)))
            self._note(f"send server/discover as MCP {version} (id {request_id}) on stdio; {limit}")
        else:
            self._post(
                wait, message, (("MCP-Protocol-Version", str(version)), ("Mcp-Method", "server/discover"))
            )
            self._note(
                f"send POST {self.path or '(the server URL)'}: server/discover as MCP {version} "
                f"(id {request_id}; MCP-Protocol-Version: {version}, Mcp-Method: server/discover); {limit}"
            )
        self._wait = wait

    def _post(self, wait: _Wait, message: Mapping[str, Any], extra: Headers) -> None:
        """POST ``message`` as the answer ``wait`` waits for (a fresh token names it)."""
        wait.token = next(self._tokens)
        headers = (
            ("Accept", "application/json, text/event-stream"),
            ("Content-Type", "application/json"),
            *extra,
        )
        self._actions.append(
            HttpRequest(
                token=wait.token, method="POST", path=self.path, headers=headers, body=orjson.dumps(message)
            )
        )

    def _legacy_offer(self, decision: _Decision) -> Revision | None:
        if decision.verdict is _V.OTHER_LEGACY:
            return decision.version
        pool = decision.hint if decision.hint is not None else self._legacy_hint
        if pool is None:
            pool = self.config.legacy
        return next((r for r in self.config.legacy if r in pool and r not in self._offered_legacy), None)

    def _send_initialize(self, decision: _Decision, verdict: _Verdict) -> None:
        if decision.hint is not None:
            self._legacy_hint = decision.hint
        offer = self._legacy_offer(decision)
        assert offer is not None  # _decide checked
        self._offered_legacy.add(offer)
        self._requests += 1
        request_id = self._next_id()
        params = {
            "protocolVersion": str(offer),
            "capabilities": downgrade(self.config.capabilities, "ClientCapabilities", offer),
            "clientInfo": downgrade(self.config.client_info, "Implementation", offer),
        }
        message = {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params}
        wait = _Wait(
            what="initialize",
            deadline=self._now + self.config.timeout,
            limit=self.config.timeout,
            request_id=request_id,
            version=offer,
        )
        limit = f"wait up to {wait.limit:g}s"
        if self.transport == "stdio":
            self._actions.append(SendMessage(payload=orjson.dumps(message)))
            self._note(f"send initialize offering MCP {offer} (id {request_id}) on stdio; {limit}")
        else:
            self._post(wait, message, ())
            self._note(
                f"send POST {self.path or '(the server URL)'}: initialize offering MCP {offer} "
                f"(id {request_id}); {limit}"
            )
        self._wait = wait

    def _restart_then_initialize(self, decision: _Decision, verdict: _Verdict) -> None:
        self._restart("the server's process ended while probing")
        self._send_initialize(decision, verdict)

    def _restart(self, reason: str) -> None:
        self._restarts += 1
        self._closed = False
        self._actions.append(Reconnect(reason=reason))
        self._note(
            f"send nothing: {reason}; start the server again ({self._restarts}/{self.config.max_restarts})"
        )

    def _open_sse(self, decision: _Decision, verdict: _Verdict) -> None:
        self._requests += 1
        token = next(self._tokens)
        self._actions.append(OpenSse(token=token, path=self.sse_path))
        self._wait = _Wait(
            what="GET", deadline=self._now + self.config.timeout, limit=self.config.timeout, token=token
        )
        self._note(
            f"send GET {self.sse_path or '(the server URL)'} (Accept: text/event-stream), "
            f"expecting a 2024-11-05 HTTP+SSE endpoint event; wait up to {self.config.timeout:g}s"
        )

    def _start_fresh(self, decision: _Decision, verdict: _Verdict) -> None:
        assert self.cached is not None
        self._note(f"cache: the cached era ({self.cached.era}) did not work; probing afresh, modern first")
        self._on_cache = False
        self._tried_modern.clear()
        self._offered_legacy.clear()
        self._legacy_hint = None
        if self._closed:
            self._restart("the server's process ended")
        self._send_discover(_Decision(verdict=_V.START_MODERN, note=""), verdict)

    def _done_modern(self, decision: _Decision, verdict: _Verdict) -> None:
        version = decision.version
        assert version is not None
        result = decision.result
        capabilities: Mapping[str, Any] | None = None
        server_info: Mapping[str, Any] | None = None
        instructions: str | None = None
        supported: tuple[str, ...] = ()
        if result is not None:
            caps = result.get("capabilities")
            capabilities = caps if isinstance(caps, dict) else {}
            meta = result.get("_meta")
            info = meta.get(META_SERVER_INFO) if isinstance(meta, dict) else None
            server_info = info if isinstance(info, dict) else None
            text = result.get("instructions")
            instructions = text if isinstance(text, str) else None
            supported = _versions(result.get("supportedVersions")) or ()
        self._note(f"decide: modern era, MCP {version}")
        self._finish(
            ProbeDone(
                era="modern",
                revision=version,
                capabilities=capabilities,
                server_info=server_info,
                instructions=instructions,
                supported=supported,
                result=result,
                cache=self._cache_verdict("modern"),
            )
        )

    def _done_legacy(self, decision: _Decision, verdict: _Verdict) -> None:
        version, result = decision.version, decision.result
        assert version is not None and result is not None
        caps = result.get("capabilities")
        info = result.get("serverInfo")
        text = result.get("instructions")
        if self.config.send_initialized:
            note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            if self.transport == "stdio":
                self._actions.append(SendMessage(payload=orjson.dumps(note)))
            else:
                headers: list[tuple[str, str]] = [
                    ("Accept", "application/json, text/event-stream"),
                    ("Content-Type", "application/json"),
                ]
                # Every request after initialize states the revision (2025-06-18
                # basic/transports, Protocol Version Header).
                if version >= _R25B:
                    headers.append(("MCP-Protocol-Version", str(version)))
                if decision.session_id is not None:
                    headers.append(("Mcp-Session-Id", decision.session_id))
                self._actions.append(
                    HttpRequest(
                        token=next(self._tokens),
                        method="POST",
                        path=self.path,
                        headers=tuple(headers),
                        body=orjson.dumps(note),
                    )
                )
            self._note("send notifications/initialized")
        session = f", session {decision.session_id}" if decision.session_id else ""
        self._note(f"decide: legacy era, MCP {version}{session}")
        self._finish(
            ProbeDone(
                era="legacy",
                revision=version,
                capabilities=caps if isinstance(caps, dict) else {},
                server_info=info if isinstance(info, dict) else None,
                instructions=text if isinstance(text, str) else None,
                session_id=decision.session_id,
                result=result,
                cache=self._cache_verdict("legacy"),
            )
        )

    def _done_sse(self, decision: _Decision, verdict: _Verdict) -> None:
        assert decision.endpoint is not None and decision.token is not None
        self._note(f"decide: legacy era over the 2024-11-05 HTTP+SSE transport; POST to {decision.endpoint}")
        self._finish(
            ProbeDone(
                era="legacy-sse",
                revision=None,
                endpoint=decision.endpoint,
                sse_token=decision.token,
                cache=self._cache_verdict("legacy-sse"),
            )
        )

    def _fail(self, decision: _Decision, verdict: _Verdict) -> None:
        reason = self._failure_reason(decision, verdict)
        self._note(f"decide: no era works: {reason}")
        self._finish(ProbeFailed(reason=reason, cache=self._cache_verdict(None)))

    def _finish(self, outcome: ProbeDone | ProbeFailed) -> None:
        self._wait = None
        outcome = replace(outcome, trace=self._full_trace())
        self._state = ProbeState.DONE if isinstance(outcome, ProbeDone) else ProbeState.FAILED
        self._outcome = outcome
        self._actions.append(outcome)

    def _failure_reason(self, decision: _Decision, verdict: _Verdict) -> str:
        if decision.failure is not None and verdict is not _V.GIVE_UP:
            return decision.failure
        timeout = f"{self.config.timeout:g}s"
        speaks = ", ".join(self.config.revisions)
        heard = "; ".join(f"{what} got {got}" for what, got in self._heard.items())
        if verdict is _V.GIVE_UP:
            if self._restarts >= self.config.max_restarts and self.transport == "stdio":
                return (
                    f"The server's process ended {self._restarts + 1} times while being probed ({heard}). "
                    "Run its command by hand and read what it writes on stderr."
                )
            return (
                f"The probe sent {self._requests} requests without settling on an era ({heard}). "
                "This looks like a server bug; report it to the server's authors with this trace."
            )
        if verdict is _V.NO_LEGACY and self.config.legacy:
            return (
                f"The server is not a modern (2026-07-28) server ({heard}), and every legacy revision it "
                "and mcpx have in common was offered and refused. Read the server's log."
            )
        if verdict is _V.NO_LEGACY:
            return (
                f"The server does not answer as a modern (2026-07-28) server ({heard}), and mcpx is "
                f"configured to speak only {speaks}. Allow a legacy revision to reach this server."
            )
        if verdict is _V.CLOSED and self.transport == "stdio":
            return (
                f"The server's process ended before it answered the probe's requests ({heard}). Read "
                "what it wrote on stderr, or run its command by hand."
            )
        if verdict is _V.NO_ANSWER:
            if self.transport == "stdio":
                return (
                    f"The server answered none of the probe's requests ({heard}). Check that the command "
                    "starts an MCP server that writes JSON-RPC on stdout (run it by hand and read its "
                    f"stderr); if it is only slow to start, raise {self.config.timeout_setting} (now {timeout})."
                )
            return (
                f"The server at {self.path or 'the configured URL'} did not answer in time ({heard}). "
                f"Check that it is up and that the URL names its MCP endpoint; if it is only slow, raise "
                f"{self.config.timeout_setting} (now {timeout})."
            )
        if verdict is _V.NO_SSE:
            return (
                f"Nothing at {self.path or 'the configured URL'} speaks MCP ({heard}). Check the URL: it "
                "should name the server's MCP endpoint (often /mcp), or its HTTP+SSE endpoint (often /sse) "
                "for a 2024-11-05 server."
            )
        return f"The probe could not settle on an era ({heard})."
