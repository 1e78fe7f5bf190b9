"""The era probe's judging: an answer read as a verdict, and the version or offer it implies.

A DiscoverResult whose ``supportedVersions`` lists the version sent is the
modern era; one, or a ``-32022``, whose list names another modern revision
mcpx speaks is retried with it; ``-32020`` and ``-32021`` are modern
refusals; anything else is legacy, never keyed to one error code.  An
``initialize`` result settles the legacy era on the server's counter-offer
when mcpx speaks it (2026-07-28 basic/versioning; every legacy revision's
basic/lifecycle).  probe.py's docstring has every rule.
"""

from __future__ import annotations

from typing import Any, Final

from .errors import HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION
from .jsonrpc import ErrorResponse, Response
from .probe_base import _V, _Decision, _ProbeBase, _Wait
from .probe_events import Headers, _header
from .revisions import Revision

# The old-transport fallback (2025-11-25 basic/transports, Backwards Compatibility).
_NOT_STREAMABLE_STATUSES: Final = frozenset({400, 404, 405})


def _short(value: Any, limit: int = 120) -> str:
    text = value if isinstance(value, str) else repr(value)
    text = "".join(ch if ch.isprintable() else "?" for ch in text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _versions(listed: Any) -> tuple[str, ...] | None:
    """A version list as the server wrote it, if it is a non-empty list of strings."""
    if isinstance(listed, list) and listed and all(isinstance(v, str) for v in listed):
        return tuple(listed)
    return None


class _Judging(_ProbeBase):
    """The judging layer: ``_judge_discover`` and ``_judge_initialize``, and the picks they make."""

    def _judge(
        self, answer: Response | ErrorResponse, wait: _Wait, *, status: int | None, headers: Headers
    ) -> _Decision:
        if wait.what == "server/discover":
            return self._judge_discover(answer, wait)
        return self._judge_initialize(answer, wait, status=status, headers=headers)

    def _known(self, listed: tuple[str, ...]) -> set[Revision]:
        return {Revision(v) for v in listed if v in self._spoken}

    @property
    def _spoken(self) -> frozenset[str]:
        return frozenset(str(r) for r in self.config.revisions)

    def _judge_discover(self, answer: Response | ErrorResponse, wait: _Wait) -> _Decision:
        sent = wait.version
        assert sent is not None
        if isinstance(answer, Response):
            self._heard.setdefault("server/discover", "a result")
            listed = _versions(answer.result.get("supportedVersions"))
            if listed is None:
                why = "no supportedVersions list"
                if "protocolVersions" in answer.result:
                    why += " (it has protocolVersions, which is not the DiscoverResult field)"
                self._heard["server/discover"] = f"a result with {why}"
                return _Decision(
                    verdict=_V.NOT_MODERN,
                    note=f"recv a result with {why}: not a DiscoverResult; try initialize",
                )
            note = f"recv a DiscoverResult: supportedVersions {list(listed)}"
            if sent in self._known(listed):
                return _Decision(verdict=_V.DISCOVERED, note=note, version=sent, result=answer.result)
            return self._pick(listed, note, source="supportedVersions")
        code, data = answer.code, answer.data
        head = f"recv error {code} ({_short(answer.message, 80)})"
        self._heard["server/discover"] = f"error {code} ({_short(answer.message, 60)})"
        if code == UNSUPPORTED_PROTOCOL_VERSION and isinstance(data, dict):
            listed = _versions(data.get("supported"))
            if listed is not None:
                return self._pick(listed, f"{head}: supported {list(listed)}", source="-32022")
        if code == HEADER_MISMATCH or (
            code == MISSING_REQUIRED_CLIENT_CAPABILITY
            and isinstance(data, dict)
            and isinstance(data.get("requiredCapabilities"), dict)
        ):
            return _Decision(
                verdict=_V.MODERN_REFUSAL,
                note=f"{head}: a modern refusal, so the server is modern; its capabilities are not known yet",
                version=sent,
            )
        return _Decision(
            verdict=_V.NOT_MODERN, note=f"{head}: not a recognised modern answer; try initialize"
        )

    def _pick(self, listed: tuple[str, ...], note: str, *, source: str) -> _Decision:
        known = self._known(listed)
        modern = [r for r in self.config.modern if r in known and r not in self._tried_modern]
        if modern:
            return _Decision(
                verdict=_V.OTHER_MODERN,
                note=f"{note}: retry server/discover as MCP {modern[0]}",
                version=modern[0],
            )
        legacy = tuple(r for r in self.config.legacy if r in known)
        if legacy:
            return _Decision(
                verdict=_V.NOT_MODERN,
                note=f"{note}: no modern revision in common; try initialize offering {legacy[0]}",
                hint=legacy,
            )
        refused = [str(r) for r in self.config.modern if r in known]
        if refused:
            failure = (
                f"The server refused MCP {', '.join(refused)} although it lists it ({source}: "
                f"{', '.join(listed)}). This is a server bug; report it to the server's authors with this trace."
            )
        else:
            failure = (
                f"The server speaks {', '.join(listed)} ({source}); mcpx speaks "
                f"{', '.join(self.config.revisions)}, so there is no revision in common. Upgrade mcpx, or "
                "configure the server to speak a revision mcpx knows."
            )
        return _Decision(
            verdict=_V.NO_COMMON_VERSION, note=f"{note}: nothing left in common", failure=failure
        )

    def _judge_initialize(
        self, answer: Response | ErrorResponse, wait: _Wait, *, status: int | None, headers: Headers
    ) -> _Decision:
        offered = wait.version
        assert offered is not None
        if isinstance(answer, Response):
            self._heard.setdefault("initialize", "a result")
            picked = answer.result.get("protocolVersion")
            if isinstance(picked, str) and picked in {str(r) for r in self.config.legacy}:
                version = Revision(picked)
                how = "accepted" if version == offered else f"a counter-offer to {offered}, accepted"
                session_id = _header(headers, "mcp-session-id")
                if session_id is not None and not (
                    session_id and all("\x21" <= ch <= "\x7e" for ch in session_id)
                ):
                    failure = (
                        f"The server's Mcp-Session-Id {_short(session_id, 40)} is not visible ASCII, so it "
                        "cannot be sent back. This is a server bug; report it to the server's authors."
                    )
                    return _Decision(
                        verdict=_V.REFUSED, note="recv an unusable Mcp-Session-Id", failure=failure
                    )
                info = answer.result.get("serverInfo")
                name = (
                    f"; serverInfo {_short(info.get('name'), 40)} {_short(info.get('version'), 20)}"
                    if isinstance(info, dict)
                    else ""
                )
                return _Decision(
                    verdict=_V.INITIALIZED,
                    note=f"recv an InitializeResult: protocolVersion {picked} ({how}){name}",
                    version=version,
                    result=answer.result,
                    session_id=session_id,
                )
            failure = (
                f"The server answered initialize with protocolVersion {_short(picked, 40)}, which is not a "
                f"legacy revision mcpx speaks ({', '.join(self.config.legacy)}). Configure the server for "
                "one of those, or upgrade mcpx."
            )
            return _Decision(
                verdict=_V.REFUSED,
                note=f"recv protocolVersion {_short(picked, 40)}: unusable",
                failure=failure,
            )
        head = f"recv error {answer.code} ({_short(answer.message, 80)})"
        self._heard["initialize"] = f"error {answer.code} ({_short(answer.message, 60)})"
        data = answer.data
        listed = _versions(data.get("supported")) if isinstance(data, dict) else None
        if listed is not None:
            known = self._known(listed)
            legacy = [r for r in self.config.legacy if r in known and r not in self._offered_legacy]
            if legacy:
                return _Decision(
                    verdict=_V.OTHER_LEGACY,
                    note=f"{head}: supported {list(listed)}; offer {legacy[0]}",
                    version=legacy[0],
                )
            modern = [
                r
                for r in self.config.modern
                if r in known and (r not in self._tried_modern or r in self._silent_modern)
            ]
            if modern:
                return _Decision(
                    verdict=_V.MODERN_HINT,
                    note=f"{head}: supported {list(listed)}, a modern server; try server/discover as {modern[0]}",
                    version=modern[0],
                )
        modern_code = answer.code in (
            HEADER_MISMATCH,
            MISSING_REQUIRED_CLIENT_CAPABILITY,
            UNSUPPORTED_PROTOCOL_VERSION,
        )
        if self.transport == "http" and status in _NOT_STREAMABLE_STATUSES and not modern_code:
            return _Decision(
                verdict=_V.NOT_STREAMABLE,
                note=f"{head} with HTTP {status}: not Streamable HTTP; try the HTTP+SSE transport",
            )
        failure = (
            f"The server refused initialize: error {answer.code} ({_short(answer.message, 120)}). "
            f"mcpx offered MCP {offered} and speaks {', '.join(self.config.revisions)}; read the server's "
            "log, or pin the server to one of those revisions."
        )
        return _Decision(verdict=_V.REFUSED, note=f"{head}: initialize refused", failure=failure)
