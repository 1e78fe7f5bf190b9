"""What the gateway's surface answers with, and the snapshot of an upstream it is built from.

Values, never exceptions, so a driver can act on each (``mcpx.core.gateway``
says what each means): ``Page``, ``Route``, ``Answer``, ``OwnResource`` and
``GatewayError``, whose every message says what to do.  ``UpstreamCatalog``
is one upstream as the pool last saw it: its lists exactly as it listed
them, its capabilities, revision and status.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from .drafts import builder
from .errors import INVALID_PARAMS, LocalProtocolError
from .gateway_uris import rewrite_result_uris
from .revisions import Revision

OWN_NAMESPACE: Final = "mcpx"
"""The namespace of mcpx's own resources; no upstream may use it (``mcpx.config``)."""


ListKind = Literal["tools", "prompts", "resources", "resourceTemplates"]


_LIST_METHODS: Final[Mapping[str, str]] = {
    "tools": "tools/list",
    "prompts": "prompts/list",
    "resources": "resources/list",
    "resourceTemplates": "resources/templates/list",
}


# mcpx.config's rule for server names, which are namespaces: a URI host label
# without "_", so that "<namespace>_<prompt>" splits at the first "_".
_NAMESPACE: Final = re.compile(r"[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?\Z")


_NAMESPACE_RULE: Final = (
    "lowercase letters, digits and '-', starting with a letter and not ending with '-', at most 63 characters"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class GatewayError:
    """A JSON-RPC error to answer the host's request with (``to_error_object()``)."""

    code: int
    message: str
    data: Any = None

    def to_error_object(self) -> dict[str, Any]:
        """The JSON-RPC ``error`` member."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


@dataclass(frozen=True, slots=True, kw_only=True)
class Page:
    """One page of a gateway list; send ``result()`` (then ``envelope``/``downgrade`` as usual)."""

    kind: ListKind
    items: tuple[Mapping[str, Any], ...]
    next_cursor: str | None = None

    def result(self) -> dict[str, Any]:
        """The list result in the newest shape."""
        out: dict[str, Any] = {self.kind: list(self.items)}
        if self.next_cursor is not None:
            out["nextCursor"] = self.next_cursor
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Route:
    """Forward ``method`` with ``params`` to upstream ``server``; answer with ``finish(its result)``.

    ``params`` are the host's (``_meta`` included, for the driver to carry per
    spec/gateway.md §5) with the name or URI the upstream knows.  An upstream
    JSON-RPC error is relayed as that error (spec/gateway.md §1), not through
    ``finish``.
    """

    server: str
    method: str
    params: Mapping[str, Any]
    rewrite_uris: bool
    unlisted: str | None = None
    """For ``mcpx_call`` of a tool its server's catalog does not list: what to tell the host if the
    upstream answers ``-32602`` (``reword``), in the words of the gateway's surface."""

    @property
    def name(self) -> str | None:
        """The tool or prompt name the upstream is asked for (``None`` for a resource)."""
        name = self.params.get("name")
        return name if isinstance(name, str) else None

    @property
    def uri(self) -> str | None:
        """The resource URI the upstream is asked for (``None`` for a tool or prompt)."""
        uri = self.params.get("uri")
        return uri if isinstance(uri, str) else None

    def finish(self, result: Mapping[str, Any]) -> Any:
        """The upstream's ``result`` as the host gets it: verbatim, URIs rewritten if this route says so."""
        return rewrite_result_uris(result, self.server) if self.rewrite_uris else result

    def reword(self, code: int, message: str) -> str:
        """The message of the upstream's JSON-RPC error ``code`` as the host gets it (code and data stay).

        Verbatim, except an unlisted tool's ``-32602``: the upstream's hint
        (``tools/list``) is no use to a gateway host, which lists only mcpx's
        tools, so mcpx says what to use and quotes the server.
        """
        if self.unlisted is not None and code == INVALID_PARAMS:
            return f"{self.unlisted} (the server said: {message})"
        return message


_route = builder(Route)  # one per routed call, built without __init__ (mcpx/core/drafts.py)


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """A complete result the gateway produced itself; send ``result``."""

    result: Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class OwnResource:
    """``mcpx://mcpx/<path>``: one of mcpx's own resources; the daemon decides what it is."""

    uri: str
    path: str


@dataclass(frozen=True, slots=True, kw_only=True)
class UpstreamCatalog:
    """A snapshot of one upstream server, as the pool last saw it.

    ``name`` is the configured server name, which is its namespace.  The
    lists are the upstream's own entries, every page joined, in its order.
    ``status`` is the pool's word for the server (``"ready"``, ``"starting"``,
    ``"failed"``, …) and ``detail`` why, when it is not ready; both are only
    shown (``mcpx_servers``).  ``revision`` is the negotiated revision, if
    the server has been reached.
    """

    name: str
    status: str = "ready"
    detail: str | None = None
    revision: Revision | None = None
    capabilities: Mapping[str, Any] = field(default_factory=dict)
    tools: Sequence[Mapping[str, Any]] = ()
    prompts: Sequence[Mapping[str, Any]] = ()
    resources: Sequence[Mapping[str, Any]] = ()
    resource_templates: Sequence[Mapping[str, Any]] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAMESPACE.match(self.name):
            raise LocalProtocolError(
                f"server name {self.name!r} cannot be a namespace: use {_NAMESPACE_RULE} (mcpx.config checks this)"
            )
        if self.name == OWN_NAMESPACE:
            raise LocalProtocolError(f"server name {OWN_NAMESPACE!r} is mcpx's own namespace; choose another")
        if self.revision is not None and not isinstance(self.revision, Revision):
            raise LocalProtocolError(f"revision must be a Revision or None, not {self.revision!r}")
        if not isinstance(self.status, str) or not self.status:
            raise LocalProtocolError("status must be a non-empty string such as 'ready'")
        for name in ("tools", "prompts", "resources", "resource_templates"):
            value = getattr(self, name)
            if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
                raise LocalProtocolError(f"{name} must be a sequence of the upstream's entries")
            object.__setattr__(self, name, tuple(value))

    def tool(self, name: str) -> Mapping[str, Any] | None:
        """The first tool this upstream lists as ``name``."""
        return next((t for t in _named_entries(self.tools) if t["name"] == name), None)


def _tool_error(message: str) -> Answer:
    return Answer(result={"content": [{"type": "text", "text": message}], "isError": True})


def _named_entries(entries: Iterable[Any], key: str = "name") -> Iterable[Mapping[str, Any]]:
    """Entries with a string ``key``, the first of each value only."""
    seen: set[str] = set()
    for entry in entries:
        if isinstance(entry, Mapping) and isinstance(entry.get(key), str) and entry[key] not in seen:
            seen.add(entry[key])
            yield entry


CollisionKind = Literal["tool", "prompt", "resource", "resourceTemplate"]
