"""Which revision a request is judged under, and whether its method may be called there.

A legacy request takes the connection's negotiated revision (2024-11-05
when nothing was negotiated); a 2026-07-28 request restates its revision
and capabilities in ``_meta`` and is judged alone (2026-07-28
basic/versioning).  A method the revision removed, or one the server did
not declare the capability for, is ``-32601``; an unsupported revision is
``-32022`` with ``data.supported``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .errors import INVALID_PARAMS, METHOD_NOT_FOUND, UNSUPPORTED_PROTOCOL_VERSION, RemoteProtocolError
from .jsonrpc import Request, RequestId
from .revisions import (
    EXTENSION_METHODS,
    LOG_LEVELS,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    TASKS_EXTENSION,
    Revision,
    Sender,
    method_rule,
)
from .server_base import _Judgement
from .server_methods import _CoreMethods, _require_tasks_extension
from .server_output import _LEVEL_RANK

# The server capability a method needs; calling one the server did not
# declare is -32601 (2026-07-28 basic/index; every revision's server pages).
_NEEDS_CAPABILITY: Final[dict[str, tuple[str, ...]]] = {
    "tools/list": ("tools",),
    "tools/call": ("tools",),
    "prompts/list": ("prompts",),
    "prompts/get": ("prompts",),
    "resources/list": ("resources",),
    "resources/templates/list": ("resources",),
    "resources/read": ("resources",),
    "resources/subscribe": ("resources", "subscribe"),
    "resources/unsubscribe": ("resources", "subscribe"),
    "completion/complete": ("completions",),
    "logging/setLevel": ("logging",),
}


class _Judging(_CoreMethods):
    """The judging layer: a request's revision, its client's capabilities, and whether its method is allowed."""

    def _judge(self, req: Request) -> _Judgement:
        meta = req.meta
        params = req.params or {}
        has_meta = isinstance(params.get("_meta"), dict)
        if self._modern_shaped(req):
            return self._judge_modern(req, meta, has_meta)
        rev = self._peer_revision()
        return _Judgement(
            revision=rev,
            modern=False,
            capabilities=self._client_capabilities,
            client_info=self._client_info,
            log_level=None,
        )

    def _judge_modern(self, req: Request, meta: Mapping[str, Any], has_meta: bool) -> _Judgement:
        version = meta.get(META_PROTOCOL_VERSION)
        caps = meta.get(META_CLIENT_CAPABILITIES)
        if not isinstance(version, str) or not isinstance(caps, dict):
            missing = []
            if not isinstance(version, str):
                missing.append(f"{META_PROTOCOL_VERSION} (a string)")
            if not isinstance(caps, dict):
                missing.append(f"{META_CLIENT_CAPABILITIES} (an object)")
            where = "params._meta" if has_meta else "params._meta (absent)"
            raise RemoteProtocolError(
                f"Invalid params: {where} must carry {' and '.join(missing)}; a 2026-07-28 request "
                "restates its protocol version and client capabilities on every request",
                code=INVALID_PARAMS,
            )
        rev = next((r for r in self._modern if r == version), None)
        if rev is None:
            supported = [str(r) for r in self._modern]
            self._trace("unsupported-version", request_id=req.id, requested=version)
            options = []
            if supported:
                options.append(f"send one of {', '.join(supported)} in _meta")
            if self._legacy and (version in self._legacy or not supported):
                options.append(f"negotiate one of {', '.join(self._legacy)} with initialize")
            hint = " or ".join(options) if options else "this server speaks no revision you can use"
            raise RemoteProtocolError(
                f"Unsupported protocol version {version!r} in params._meta; {hint}",
                code=UNSUPPORTED_PROTOCOL_VERSION,
                data={"supported": supported, "requested": version},
            )
        level = meta.get(META_LOG_LEVEL)
        if level is not None and not (isinstance(level, str) and level in _LEVEL_RANK):
            raise RemoteProtocolError(
                f"Invalid params: {META_LOG_LEVEL} must be one of {', '.join(LOG_LEVELS)}",
                code=INVALID_PARAMS,
            )
        info = meta.get(META_CLIENT_INFO)
        self._trace("judged", request_id=req.id, revision=str(rev), era="modern")
        return _Judgement(
            revision=rev,
            modern=True,
            capabilities=caps,
            client_info=info if isinstance(info, dict) else None,
            log_level=level if isinstance(level, str) else None,
        )

    def _check_method(self, method: str, request_id: RequestId | None, judged: _Judgement) -> Revision:
        """Raise the error a request for ``method`` earns; return its defining revision.

        For a method the session does not answer itself the outcome depends only
        on ``method`` and ``judged.revision`` (``_plain_route`` relies on it).
        """
        rev = judged.revision
        rule = method_rule(method, sender=Sender.CLIENT)
        ext_methods = EXTENSION_METHODS[TASKS_EXTENSION]
        if judged.modern and method in ext_methods and not method.startswith("notifications/"):
            _require_tasks_extension(judged, method)
            return rev
        if rule is None:
            raise RemoteProtocolError(f"Method not found: {method}", code=METHOD_NOT_FOUND, http_status=404)
        if rule.removed_for(rev):
            self._trace("removed-method", request_id=request_id, method=method, revision=str(rev))
            instead = f"; use {rule.replacement}" if rule.replacement else ""
            raise RemoteProtocolError(
                f"Method not found: {method} was removed in MCP {rule.removed_in}{instead}",
                code=METHOD_NOT_FOUND,
                http_status=404,
            )
        needs = _NEEDS_CAPABILITY.get(method)
        if needs is not None and not self._declares(needs, rev):
            raise RemoteProtocolError(
                f"Method not found: this server does not offer {'.'.join(needs)} ({method})",
                code=METHOD_NOT_FOUND,
                http_status=404,
            )
        return rule.since

    def _declares(self, path: tuple[str, ...], rev: Revision) -> bool:
        node: Any = self.config.capabilities
        for key in path:
            if not isinstance(node, dict) or key not in node:
                return False
            node = node[key]
        return node is not False and node is not None
