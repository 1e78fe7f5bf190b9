"""The era probe's states, verdicts and fields: the lowest layer of ``EraProbe`` (probe.py).

``ProbeState`` is where the probe stands, ``_Verdict`` what an answer (or
its absence) means; ``_TRANSITIONS`` in probe.py maps the pair to an effect
and the next state.  ``_ProbeBase.__init__`` holds every field the layers
share, and the trace every decision is written to.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from .probe_cache import EraEntry
from .probe_events import CacheVerdict, Headers, ProbeAction, ProbeConfig, ProbeDone, ProbeFailed
from .revisions import Revision
from .sse import SseDecoder

Transport = Literal["stdio", "http"]


_MAX_TRACE: Final = 200


class ProbeState(enum.Enum):
    IDLE = "idle"  # built; start() not called
    DISCOVERING = "discovering"  # waiting for the answer to server/discover
    INITIALIZING = "initializing"  # waiting for the answer to initialize
    OPENING_SSE = "opening-sse"  # waiting for the HTTP+SSE endpoint event
    DONE = "done"
    FAILED = "failed"


class _Verdict(enum.Enum):
    START_MODERN = "start modern first"
    START_LEGACY = "start at initialize"
    START_SSE = "start at the HTTP+SSE stream"
    DISCOVERED = "a DiscoverResult listing the version sent"
    OTHER_MODERN = "a DiscoverResult or -32022 naming another modern revision mcpx speaks"
    MODERN_REFUSAL = "-32020, or -32021 with requiredCapabilities"
    NO_COMMON_VERSION = "a DiscoverResult or -32022 naming nothing mcpx can still try"
    NOT_MODERN = "anything else, or a list naming only legacy revisions"
    NO_ANSWER = "silence until the deadline"
    CLOSED = "the server's process ended"
    AUTH = "HTTP 401/403/407"
    INITIALIZED = "an InitializeResult with a revision mcpx speaks"
    OTHER_LEGACY = "an initialize error listing another legacy revision mcpx speaks"
    MODERN_HINT = "an initialize error listing an untried modern revision"
    REFUSED = "initialize refused, or answered with something mcpx cannot use"
    NOT_STREAMABLE = "initialize over HTTP failed the old-transport way"
    ENDPOINT = "the HTTP+SSE stream named its endpoint"
    NO_SSE = "no HTTP+SSE stream"
    STALE = "the cached era failed"
    NO_LEGACY = "legacy needed but mcpx is configured without it"
    GIVE_UP = "a budget is spent"


_S = ProbeState


_V = _Verdict


@dataclass(frozen=True, slots=True, kw_only=True)
class _Decision:
    verdict: _Verdict
    note: str  # the trace line: what came back and what it means
    version: Revision | None = None  # the revision to try next, when the answer named one
    hint: tuple[Revision, ...] | None = None  # legacy revisions the server listed
    result: Mapping[str, Any] | None = None
    session_id: str | None = None
    endpoint: str | None = None
    token: int | None = None  # the HTTP+SSE stream that named the endpoint
    failure: str | None = None  # the reason, when the verdict ends the probe


@dataclass(slots=True)
class _Wait:
    what: str  # "server/discover" | "initialize" | "GET"
    deadline: float
    limit: float  # seconds, from the wait's start to its deadline
    request_id: str | None = None
    token: int | None = None
    version: Revision | None = None
    status: int | None = None
    headers: Headers = ()
    complete: bool = False
    body: bytearray = field(default_factory=bytearray)
    decoder: SseDecoder | None = None


class _ProbeBase:
    """The probe's fields and its trace (see ``EraProbe`` for the rules)."""

    def __init__(
        self,
        config: ProbeConfig,
        *,
        transport: Transport,
        path: str = "",
        sse_path: str | None = None,
        cached: EraEntry | None = None,
    ) -> None:
        if transport not in ("stdio", "http"):
            raise ValueError(f"transport is 'stdio' or 'http', not {transport!r}")
        self.config = config
        self.transport: Transport = transport
        self.path = path
        self.sse_path = path if sse_path is None else sse_path
        self.cached = cached
        self._state = ProbeState.IDLE
        self._actions: list[ProbeAction] = []
        self._trace: list[str] = []
        self._dropped_trace = 0
        self._ids = itertools.count(1)
        self._tokens = itertools.count(1)
        self._now = 0.0
        self._wait: _Wait | None = None
        self._requests = 0
        self._restarts = 0
        self._closed = False  # stdio: the server's output ended
        self._on_cache = False
        self._tried_modern: set[Revision] = set()
        # Modern revisions whose server/discover met silence: a later -32022 naming one
        # means the server is modern and was slow to start, so it is tried once more.
        self._silent_modern: set[Revision] = set()
        self._last_discover: Revision | None = None
        self._offered_legacy: set[Revision] = set()
        self._legacy_hint: tuple[Revision, ...] | None = None
        self._heard: dict[str, str] = {}  # what each step got, for the failure message
        self._outcome: ProbeDone | ProbeFailed | None = None

    def _note(self, line: str) -> None:
        if len(self._trace) < _MAX_TRACE:
            self._trace.append(line)
        else:
            self._dropped_trace += 1

    def _full_trace(self) -> tuple[str, ...]:
        if self._dropped_trace:
            return (*self._trace, f"… {self._dropped_trace} more steps not recorded")
        return tuple(self._trace)

    def _cache_verdict(self, era: str | None) -> CacheVerdict:
        if self.cached is None:
            return "none"
        return "confirmed" if era == self.cached.era else "stale"
