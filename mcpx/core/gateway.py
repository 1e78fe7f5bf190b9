"""The gateway's surface: what mcpx offers a host, built from its upstreams' catalogs.

mcpx's main job is to stand in front of several MCP servers
(spec/gateway.md §1, §2).  This module decides, without any I/O, what a host
sees and where each of its requests goes.  The driver gives it a snapshot of
every upstream's catalog (``UpstreamCatalog``: tools, prompts, resources and
resource templates exactly as the upstream listed them, its declared
capabilities, revision and status) and builds a ``GatewaySurface``; when a
catalog changes it builds a new one.  The surface answers with values, never
with exceptions, so a driver can act on each:

``Page``
    One page of a list, ready to send (``Page.result()``).
``Route``
    Forward ``method`` with ``params`` to the upstream ``server``; pass what
    it answers through ``Route.finish`` (which rewrites resource URIs when
    the route asks for it) and send that.
``Answer``
    A result the gateway produced itself (``mcpx_servers``, ``mcpx_search``,
    ``mcpx_describe``, and ``isError`` results of gateway tools).
``OwnResource``
    An ``mcpx://mcpx/…`` URI: mcpx's own artifacts, which the daemon serves.
``GatewayError``
    A JSON-RPC error object to answer with; every message says what to do.

Theory of operation
-------------------

**Gateway mode** (no pass-through, the default; spec/gateway.md §1): the tool
list is the fixed ``GATEWAY_TOOL_NAMES`` — ``mcpx_call`` (forward one call,
result carried verbatim), ``mcpx_servers``, ``mcpx_search`` and
``mcpx_describe`` — so ``tools.listChanged`` is false.  Every upstream prompt
is offered as ``<namespace>_<prompt>``; a namespace is a server name, which
never contains ``_`` (``mcpx.config``'s rule, repeated here), so the first
``_`` splits a name unambiguously.  Every resource is offered as
``mcpx://<namespace>/<percent-encoded upstream URI>``, every template as the
same form with its ``{expressions}`` kept.  Results that came through the
gateway (``mcpx_call``, a namespaced prompt, an ``mcpx://`` read) have their
resource URIs rewritten to ``mcpx://`` ones ``/mcp`` can read (spec/gateway.md
§1, "URIs inside results"), by ``rewrite_result_uris`` (``gateway_uris.py``, with
the encoding rules).

**Pass-through mode** (``mcp.passthrough`` names servers; spec/gateway.md §2):
the named upstreams' tools, prompts and resources are listed under their own
names and URIs, verbatim (``execution.taskSupport`` included), ahead of the
gateway's own entries; their results are carried verbatim, URIs untouched.  A
collision costs only the colliding name: a tool or prompt name two or more of
them offer is listed by none of them, and each one's entry is listed as
``<server>_<name>`` instead, which routes to that server under its own name;
the bare name is a ``-32602`` naming the aliases.  An alias never takes a name
a pass-through server offers (nor a gateway tool's, nor a namespaced
prompt's): it gets the first free ``_2``, ``_3``, … suffix.  A resource URI
(or template) two of them list is listed bare for the first, where a bare read
goes, and under its ``mcpx://`` form for each other.  Every collision is a
``Collision`` in ``collisions``, settled once when the surface is built.  The
upstream wins a collision with a gateway tool or namespaced prompt, which is
then neither listed nor routed.  A tool or prompt name nobody lists goes to
the first pass-through upstream, which says whether it exists.  A bare
resource URI goes to the first upstream, in the order given, that lists it or
has a template it falls under, else to the first.  ``mcpx://`` URIs still
reach every server (and mcpx's own), and servers not passed through keep their
namespaced prompts and resources.

Decisions recorded here
-----------------------

* **mcpx:// encoding** (spec/gateway.md §1, "Resources and templates").
  ``mcpx_uri(ns, uri)`` is ``mcpx://`` + the namespace percent-encoded as an
  RFC 3986 reg-name + ``/`` + the URI's UTF-8 bytes (lone surrogates included,
  as ``surrogatepass`` writes them) with every byte outside unreserved,
  sub-delims, ``:`` and ``@`` percent-encoded — ``/`` included, so the
  upstream URI is one path segment that no host's dot-segment normalisation
  can touch.  ``parse_mcpx_uri`` inverts it for every string (a property test
  checks the identity over arbitrary text); it accepts either hex case and
  refuses malformed escapes.  This replaces an earlier form that dropped a
  URI's leading ``/``, which needed a lookup to undo.
* **Templates.**  A gateway-mode template keeps its RFC 6570 expressions and
  encodes only the literal text (lowercase hex, ``'`` escaped: RFC 6570
  literals exclude it, and fastjsonschema's ``uri-template`` check, which
  the strict sweep uses, accepts no uppercase hex), so a host that expands
  it gets an ``mcpx://`` URI.  A value a host expands with reserved characters
  (``{var}`` gives ``a%2Fb`` for ``a/b``) reaches the upstream decoded
  (``a/b``), as ``{+var}`` would have spelled it.  Matching a bare URI
  against a pass-through upstream's templates implements RFC 6570 level 1
  (``{var}`` matches a run without ``/``, ``?`` or ``#``) and is generous
  with the other operators (``{+var}``/``{#var}`` match anything, ``{/var}``
  anything up to ``?``/``#``, ``{?var}``/``{&var}`` anything up to ``#``,
  ``{.var}``/``{;var}`` as ``{var}``), by an automaton linear in the URI.
* **Cursors** (spec/gateway.md §1, "Cursors"; every revision's
  server/utilities/pagination page asks for ``-32602`` on an invalid
  cursor).  ``payload.MAC``: the payload names the list, the offset and a
  fingerprint of the list's keys; the MAC is HMAC-SHA256 (truncated to 128
  bits) over the payload's exact text under the key the caller passes, so
  any edit of the text is refused.  A cursor for another list, from another
  key (another daemon process), or from before the list changed is a
  ``-32602`` that says which and what to do — never page one.
* **Listed entries are carried verbatim** (spec/gateway.md §1, §2: listed
  tools, resources, templates and prompts keep their optional fields), only
  the name or URI rewritten where the mode asks.  The Go daemon that came
  before mcpx dropped ``outputSchema``, ``title`` and ``annotations``; that
  was a limit of its catalogue, not a rule.  Entries without a string name
  (tools, prompts), ``uri`` (resources) or ``uriTemplate`` (templates) are
  left out; an upstream listing a name twice is listed once.
* **Forwarded params** are the host's, so ``_meta`` reaches the driver,
  which rewrites progress tokens and narrows capabilities (spec/gateway.md
  §5, §2); ``task`` is dropped, because it asks mcpx, not the upstream, to
  run the call as a task (spec/gateway.md §6).
* **Gateway tools' argument mistakes** follow the embedding API
  (``mcpx.server``): ``-32602`` before 2025-11-25, an ``isError`` result from
  2025-11-25 on (SEP-1303).  A server the arguments name that mcpx does not
  have is an ``isError`` result in every revision: the model chose it.

Objects returned (pages, routes, answers) share structure with the catalogs:
never edit them; ``downgrade`` copies on write before anything is spelled
for an older peer.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import orjson

from .drafts import builder
from .errors import INVALID_PARAMS, RESOURCE_NOT_FOUND, LocalProtocolError
from .gateway_tools import (
    _SEARCH_LIMIT,
    _TOOLS_BY_NAME,
    GATEWAY_TOOL_NAMES,
    _check_arguments,
    _structured,
)
from .gateway_uris import (
    _SCHEME,
    McpxUriError,
    _clip,
    mcpx_uri,
    mcpx_uri_template,
    parse_mcpx_uri,
    rewrite_result_uris,
    template_matches,
)
from .revisions import NEWEST, Revision

__all__ = [
    "OWN_NAMESPACE",
    "Answer",
    "Collision",
    "GatewayError",
    "GatewaySurface",
    "ListKind",
    "OwnResource",
    "Page",
    "Route",
    "UpstreamCatalog",
]

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

_DEFAULT_PAGE_SIZE: Final = 100
_SEARCH_DESCRIPTION_CHARS: Final = 300


# ----------------------------------------------------------------------------
# Results
# ----------------------------------------------------------------------------


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


# ----------------------------------------------------------------------------
# Input: one upstream's catalog
# ----------------------------------------------------------------------------


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


# ----------------------------------------------------------------------------
# The gateway's own tools' answers (their definitions: gateway_tools.py)
# ----------------------------------------------------------------------------


def _tool_error(message: str) -> Answer:
    return Answer(result={"content": [{"type": "text", "text": message}], "isError": True})


# ----------------------------------------------------------------------------
# Cursors
# ----------------------------------------------------------------------------

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


# ----------------------------------------------------------------------------
# The surface
# ----------------------------------------------------------------------------


def _named_entries(entries: Iterable[Any], key: str = "name") -> Iterable[Mapping[str, Any]]:
    """Entries with a string ``key``, the first of each value only."""
    seen: set[str] = set()
    for entry in entries:
        if isinstance(entry, Mapping) and isinstance(entry.get(key), str) and entry[key] not in seen:
            seen.add(entry[key])
            yield entry


@dataclass(frozen=True, slots=True)
class _Listing:
    items: tuple[Mapping[str, Any], ...]
    fingerprint: str


CollisionKind = Literal["tool", "prompt", "resource", "resourceTemplate"]
_COLLISION_LIST: Final[Mapping[CollisionKind, ListKind]] = {
    "tool": "tools",
    "prompt": "prompts",
    "resource": "resources",
    "resourceTemplate": "resourceTemplates",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Collision:
    """A name or URI that two or more pass-through servers offer, and what the host is shown for each.

    ``kind`` says what collided; ``name`` is the tool or prompt name, or the
    resource URI or URI template; ``servers`` are every server offering it,
    in the order ``mcp.passthrough`` gives; ``offered`` is, for each of them
    in that order, ``(server, what the host is shown for its entry)``: a
    ``<server>_<name>`` alias for tools and prompts (a numeric suffix where
    that is taken), the bare URI for the first server and an ``mcpx://`` form
    for the others for resources and templates.
    """

    kind: CollisionKind
    name: str
    servers: tuple[str, ...]
    offered: tuple[tuple[str, str], ...]

    def to_json(self) -> dict[str, Any]:
        """As ``mcpx_servers``, ``/v1/servers`` and log messages report it."""
        return {
            "kind": self.kind,
            "name": self.name,
            "servers": list(self.servers),
            "offered": [{"server": server, "as": shown} for server, shown in self.offered],
        }

    def describe(self) -> str:
        """One sentence for a person: who offers what, and under which names it is offered instead."""
        servers = ", ".join(repr(s) for s in self.servers[:-1]) + f" and {self.servers[-1]!r}"
        shown = ", ".join(f"{server}'s as {as_!r}" for server, as_ in self.offered)
        label = {"resourceTemplate": "resource template"}.get(self.kind, self.kind)
        return f"the {label} {self.name!r} is offered by {servers}, all passed through: mcpx offers {shown}"


def _free_name(base: str, taken: set[str]) -> str:
    """``base``, or ``base_2``, ``base_3``, … : the first that nothing listed is called (deterministic)."""
    if base not in taken:
        return base
    n = 2
    while f"{base}_{n}" in taken:
        n += 1
    return f"{base}_{n}"


def _collision_error(collision: Collision, method: str) -> GatewayError:
    """A call of a colliding bare name: which aliases to call instead (the bare name is listed by nobody)."""
    aliases = " or ".join(repr(shown) for _, shown in collision.offered)
    return GatewayError(
        code=INVALID_PARAMS,
        message=(
            f"Unknown {collision.kind}: {method} of {collision.name!r} is ambiguous, because "
            f"{collision.describe()}; call {aliases} ({_LIST_METHODS[_COLLISION_LIST[collision.kind]]} "
            "lists them)"
        ),
        data={"name": collision.name, "collision": collision.to_json()},
    )


class GatewaySurface:
    """What mcpx offers a host over a snapshot of its upstreams' catalogs, and where requests go.

    Build one per snapshot: ``catalogs`` in configuration order,
    ``passthrough`` the servers offered under their own names (in the order
    given), ``cursor_key`` the HMAC key cursors are signed with (per daemon
    process, from the caller), ``page_size`` the longest page of a list.
    Then answer each host request with the matching method and act on the
    value it returns (see the module docstring).  Nothing here changes after
    construction.
    """

    def __init__(
        self,
        catalogs: Sequence[UpstreamCatalog],
        *,
        cursor_key: bytes,
        passthrough: Sequence[str] = (),
        page_size: int = _DEFAULT_PAGE_SIZE,
    ) -> None:
        if not isinstance(cursor_key, bytes) or len(cursor_key) < 16:
            raise LocalProtocolError(
                "cursor_key must be at least 16 random bytes, generated per daemon process"
            )
        if not isinstance(page_size, int) or isinstance(page_size, bool) or page_size < 1:
            raise LocalProtocolError(f"page_size must be a positive integer, not {page_size!r}")
        self._catalogs: dict[str, UpstreamCatalog] = {}
        for catalog in catalogs:
            if not isinstance(catalog, UpstreamCatalog):
                raise LocalProtocolError(
                    f"catalogs must be UpstreamCatalog values, not {type(catalog).__name__}"
                )
            if catalog.name in self._catalogs:
                raise LocalProtocolError(f"server {catalog.name!r} has two catalogs; give one per server")
            self._catalogs[catalog.name] = catalog
        if isinstance(passthrough, str):
            raise LocalProtocolError("passthrough is a sequence of server names, not one string")
        seen: set[str] = set()
        for name in passthrough:
            if name not in self._catalogs:
                configured = ", ".join(self._catalogs) or "none"
                raise LocalProtocolError(
                    f"mcp.passthrough names {name!r}, which is not a configured server (configured: {configured})"
                )
            if name in seen:
                raise LocalProtocolError(f"mcp.passthrough names {name!r} twice")
            seen.add(name)
        self._passthrough: tuple[str, ...] = tuple(passthrough)
        self._cursors = _Cursors(cursor_key)
        self._page_size = page_size
        self._build()

    # -- construction ----------------------------------------------------

    def _build(self) -> None:
        passed = [self._catalogs[name] for name in self._passthrough]
        gatewayed = [c for c in self._catalogs.values() if c.name not in self._passthrough]

        # Tools: pass-through ones under their own names (colliding ones under aliases), then the
        # gateway's not shadowed.
        self._tool_owner: dict[str, str] = {}
        self._tool_alias: dict[str, tuple[str, str]] = {}
        tool_collisions, pt_tools = self._merge_names(
            passed, "tool", lambda c: c.tools, self._tool_owner, self._tool_alias, set(GATEWAY_TOOL_NAMES)
        )
        self._colliding: dict[tuple[str, str], Collision] = {("tool", c.name): c for c in tool_collisions}
        self._visible_gateway_tools = tuple(
            n for n in GATEWAY_TOOL_NAMES if n not in self._tool_owner and ("tool", n) not in self._colliding
        )
        self._offered_tools = tuple(pt_tools)
        self._tools = self._listing(
            [*(entry for _, _, entry in pt_tools), *(_TOOLS_BY_NAME[n] for n in self._visible_gateway_tools)],
            "name",
        )

        # Prompts: pass-through ones (colliding ones under aliases), then "<namespace>_<prompt>" for
        # the rest, the upstream winning.
        self._prompt_owner: dict[str, str] = {}
        self._prompt_alias: dict[str, tuple[str, str]] = {}
        namespaced_names = {
            f"{catalog.name}_{prompt['name']}"
            for catalog in gatewayed
            for prompt in _named_entries(catalog.prompts)
        }
        prompt_collisions, pt_prompts = self._merge_names(
            passed, "prompt", lambda c: c.prompts, self._prompt_owner, self._prompt_alias, namespaced_names
        )
        self._colliding.update({("prompt", c.name): c for c in prompt_collisions})
        namespaced = [
            {**prompt, "name": f"{catalog.name}_{prompt['name']}"}
            for catalog in gatewayed
            for prompt in _named_entries(catalog.prompts)
            if f"{catalog.name}_{prompt['name']}" not in self._prompt_owner
            and f"{catalog.name}_{prompt['name']}" not in self._prompt_alias
        ]
        self._prompts = self._listing([*(entry for _, _, entry in pt_prompts), *namespaced], "name")

        # Resources and templates: pass-through ones as listed; a URI (or template) several of them
        # list is listed bare for the first, where bare reads go, and as mcpx:// for the others.
        resource_collisions, pt_resources = self._merge_uris(passed, "resource")
        template_collisions, pt_templates = self._merge_uris(passed, "resourceTemplate")
        self._collisions = (*tool_collisions, *prompt_collisions, *resource_collisions, *template_collisions)
        self._collisions_by_list: dict[ListKind, tuple[Collision, ...]] = {
            kind: tuple(c for c in self._collisions if _COLLISION_LIST[c.kind] == kind)
            for kind in _COLLISION_LIST.values()
        }
        resources = [
            {**resource, "uri": mcpx_uri(catalog.name, resource["uri"])}
            for catalog in gatewayed
            for resource in _named_entries(catalog.resources, "uri")
        ]
        templates = [
            {**template, "uriTemplate": mcpx_uri_template(catalog.name, template["uriTemplate"])}
            for catalog in gatewayed
            for template in _named_entries(catalog.resource_templates, "uriTemplate")
        ]
        self._resource_uris = {
            c.name: frozenset(r["uri"] for r in _named_entries(c.resources, "uri"))
            for c in self._catalogs.values()
        }
        self._template_strings = {
            c.name: tuple(t["uriTemplate"] for t in _named_entries(c.resource_templates, "uriTemplate"))
            for c in self._catalogs.values()
        }
        self._resources = self._listing([*pt_resources, *resources], "uri")
        self._templates = self._listing([*pt_templates, *templates], "uriTemplate")
        self._tool_names: dict[str, frozenset[str]] = {}  # per server, made at its first mcpx_call

    @staticmethod
    def _merge_names(
        catalogs: Sequence[UpstreamCatalog],
        kind: Literal["tool", "prompt"],
        entries: Callable[[UpstreamCatalog], Sequence[Mapping[str, Any]]],
        owner: dict[str, str],
        aliases: dict[str, tuple[str, str]],
        reserved: set[str],
    ) -> tuple[list[Collision], list[tuple[str, str, Mapping[str, Any]]]]:
        """Pass-through entries as listed, each ``(shown name, server, entry as shown)``, and the collisions.

        A name one server offers is its own (``owner``); a name several offer is
        listed by nobody, and each server's entry is offered as
        ``<server>_<name>`` instead (``aliases``: alias → (server, its name)).
        An alias never takes a name any pass-through server offers, nor one in
        ``reserved``: it gets the first free ``_2``, ``_3``, … suffix.  Names are
        settled in the order they first appear (``mcp.passthrough`` order), so
        the same catalogs always give the same aliases.
        """
        offered: dict[str, list[str]] = {}
        for catalog in catalogs:
            for entry in _named_entries(entries(catalog)):
                offered.setdefault(entry["name"], []).append(catalog.name)
        taken = set(offered) | reserved
        alias_of: dict[tuple[str, str], str] = {}
        collisions: list[Collision] = []
        for name, servers in offered.items():
            if len(servers) < 2:
                continue
            shown: list[tuple[str, str]] = []
            for server in servers:
                alias = _free_name(f"{server}_{name}", taken)
                taken.add(alias)
                alias_of[(server, name)] = alias
                aliases[alias] = (server, name)
                shown.append((server, alias))
            collisions.append(Collision(kind=kind, name=name, servers=tuple(servers), offered=tuple(shown)))
        merged: list[tuple[str, str, Mapping[str, Any]]] = []
        for catalog in catalogs:
            for entry in _named_entries(entries(catalog)):
                shown_as = alias_of.get((catalog.name, entry["name"]))
                if shown_as is None:
                    owner[entry["name"]] = catalog.name
                    merged.append((entry["name"], catalog.name, entry))
                else:
                    merged.append((shown_as, catalog.name, {**entry, "name": shown_as}))
        return collisions, merged

    @staticmethod
    def _merge_uris(
        catalogs: Sequence[UpstreamCatalog], kind: Literal["resource", "resourceTemplate"]
    ) -> tuple[list[Collision], list[Mapping[str, Any]]]:
        """Pass-through resources (or templates) as listed, and the URIs several servers list.

        A URI is not a name the host picks: a result's resource link carries the
        bare URI, and a bare read goes to the first server that lists it.  So
        the first keeps it, and the others' entries are listed under their
        ``mcpx://`` forms, which reach them.
        """
        key = "uri" if kind == "resource" else "uriTemplate"
        spell = mcpx_uri if kind == "resource" else mcpx_uri_template

        def listed(catalog: UpstreamCatalog) -> Iterable[Mapping[str, Any]]:
            return _named_entries(
                catalog.resources if kind == "resource" else catalog.resource_templates, key
            )

        listers: dict[str, list[str]] = {}
        for catalog in catalogs:
            for entry in listed(catalog):
                listers.setdefault(entry[key], []).append(catalog.name)
        merged: list[Mapping[str, Any]] = []
        for catalog in catalogs:
            for entry in listed(catalog):
                first = listers[entry[key]][0]
                merged.append(
                    entry if first == catalog.name else {**entry, key: spell(catalog.name, entry[key])}
                )
        collisions = [
            Collision(
                kind=kind,
                name=uri,
                servers=tuple(servers),
                offered=tuple((s, uri if i == 0 else spell(s, uri)) for i, s in enumerate(servers)),
            )
            for uri, servers in listers.items()
            if len(servers) > 1
        ]
        return collisions, merged

    @staticmethod
    def _listing(items: list[Mapping[str, Any]], key: str) -> _Listing:
        return _Listing(tuple(items), _fingerprint(item[key] for item in items))

    # -- what the surface is ----------------------------------------------

    @property
    def servers(self) -> tuple[str, ...]:
        """Every upstream, in configuration order."""
        return tuple(self._catalogs)

    @property
    def passthrough(self) -> tuple[str, ...]:
        """The servers offered under their own names, in the order given."""
        return self._passthrough

    @property
    def collisions(self) -> tuple[Collision, ...]:
        """What several pass-through servers offer under one name or URI: tools, prompts, resources, templates.

        Settled when the surface is built; each is listed under aliases (see
        ``Collision``).  Report them (``mcpx_servers`` does, and the daemon
        tells hosts that asked for log messages when it lists).
        """
        return self._collisions

    def collisions_in(self, kind: ListKind) -> tuple[Collision, ...]:
        """The collisions that list ``kind`` (``"tools"``, …) shows under aliases."""
        return self._collisions_by_list[kind]

    @property
    def offered_tools(self) -> tuple[tuple[str, str, Mapping[str, Any]], ...]:
        """Each pass-through tool as listed: ``(name the host is shown, server, the server's own entry)``.

        The entry is as listed (an alias's under the alias, otherwise verbatim),
        for what the driver reads of it before routing (``x-mcp-header``,
        ``taskSupport``), keyed by the name the host calls.
        """
        return self._offered_tools

    @property
    def tools_list_changed(self) -> bool:
        """Whether to declare ``tools.listChanged``: only when passing through (spec/gateway.md §1)."""
        return bool(self._passthrough)

    # -- lists --------------------------------------------------------------

    def list_tools(self, cursor: object = None) -> Page | GatewayError:
        """``tools/list``: pass-through tools, then the gateway's; ``params.cursor`` as given."""
        return self._page("tools", self._tools, cursor)

    def list_prompts(self, cursor: object = None) -> Page | GatewayError:
        """``prompts/list``: pass-through prompts, then ``<namespace>_<prompt>`` for the rest."""
        return self._page("prompts", self._prompts, cursor)

    def list_resources(self, cursor: object = None) -> Page | GatewayError:
        """``resources/list``: pass-through resources as listed, then ``mcpx://`` ones for the rest."""
        return self._page("resources", self._resources, cursor)

    def list_resource_templates(self, cursor: object = None) -> Page | GatewayError:
        """``resources/templates/list``: as ``list_resources``, for templates."""
        return self._page("resourceTemplates", self._templates, cursor)

    def _page(self, kind: ListKind, listing: _Listing, cursor: object) -> Page | GatewayError:
        start = self._cursors.read(cursor, kind, listing.fingerprint, len(listing.items))
        if isinstance(start, GatewayError):
            return start
        end = start + self._page_size
        next_cursor = self._cursors.mint(kind, end, listing.fingerprint) if end < len(listing.items) else None
        return Page(kind=kind, items=listing.items[start:end], next_cursor=next_cursor)

    # -- tools/call -----------------------------------------------------------

    def call_tool(
        self, params: Mapping[str, Any], *, revision: Revision = NEWEST
    ) -> Route | Answer | GatewayError:
        """``tools/call`` from a host on ``revision``: where it goes, or the gateway's own answer."""
        name = params.get("name")
        if not isinstance(name, str):
            return GatewayError(
                code=INVALID_PARAMS, message="Invalid params: tools/call needs params.name, a string"
            )
        owner = self._tool_owner.get(name)
        if owner is not None:
            return _route(
                server=owner,
                method="tools/call",
                params=_forwarded(params),
                rewrite_uris=False,
                unlisted=None,
            )
        alias = self._tool_alias.get(name)
        if alias is not None:  # the server's own name goes upstream
            return _route(
                server=alias[0],
                method="tools/call",
                params={**_forwarded(params), "name": alias[1]},
                rewrite_uris=False,
                unlisted=None,
            )
        collision = self._colliding.get(("tool", name))
        if collision is not None:
            return _collision_error(collision, "tools/call")
        if name in self._visible_gateway_tools:
            return self._gateway_tool(name, params, revision)
        if self._passthrough:  # spec/gateway.md §2: names it does not list are forwarded
            return _route(
                server=self._passthrough[0],
                method="tools/call",
                params=_forwarded(params),
                rewrite_uris=False,
                unlisted=None,
            )
        offered = ", ".join(self._visible_gateway_tools)
        return GatewayError(
            code=INVALID_PARAMS,
            message=(
                f"Unknown tool: no tool named {name!r}; mcpx offers {offered}: find an upstream tool with "
                "mcpx_search and call it with mcpx_call"
            ),
            data={"name": name},
        )

    def _gateway_tool(
        self, name: str, params: Mapping[str, Any], revision: Revision
    ) -> Route | Answer | GatewayError:
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        problem = (
            "arguments must be an object"
            if not isinstance(arguments, dict)
            else _check_arguments(name, arguments)
        )
        if problem is not None:
            message = f"Invalid arguments for tool {name!r}: {problem}"
            if revision >= Revision.V2025_11_25:  # SEP-1303: the model can read it and retry
                return _tool_error(message)
            return GatewayError(code=INVALID_PARAMS, message=f"Invalid params: {message}")
        if name == "mcpx_servers":
            return Answer(
                result=_structured(
                    {
                        "servers": [self._server_entry(c) for c in self._catalogs.values()],
                        "collisions": [c.to_json() for c in self._collisions],
                    }
                )
            )
        unknown = self._unknown_server(arguments.get("server"), call=name == "mcpx_call")
        if unknown is not None:
            return unknown
        if name == "mcpx_call":
            forwarded: dict[str, Any] = {
                "name": arguments["tool"],
                "arguments": arguments.get("arguments") or {},
            }
            if "_meta" in params:
                forwarded["_meta"] = params["_meta"]
            server, tool = arguments["server"], arguments["tool"]
            unlisted = None
            if tool not in self._listed_tools(server):  # forwarded all the same: the server decides
                unlisted = (
                    f"server {server!r} has no tool named {tool!r} in the catalog mcpx last read: "
                    f"mcpx_search finds tools by words, mcpx_describe shows how to call one"
                )
            return _route(
                server=server, method="tools/call", params=forwarded, rewrite_uris=True, unlisted=unlisted
            )
        if name == "mcpx_search":
            return self._search(
                arguments["query"], arguments.get("server"), arguments.get("limit") or _SEARCH_LIMIT
            )
        return self._describe(arguments["server"], arguments["tool"])

    def _listed_tools(self, server: str) -> frozenset[str]:
        """The names of the tools ``server``'s catalog lists (the index ``mcpx_call`` looks a tool up in)."""
        names = self._tool_names.get(server)
        if names is None:
            tools = _named_entries(self._catalogs[server].tools)
            names = self._tool_names[server] = frozenset(tool["name"] for tool in tools)
        return names

    def _unknown_server(self, server: str | None, *, call: bool) -> Answer | GatewayError | None:
        """A server name mcpx does not have; ``call``: in ``mcpx_call``, else in a search or description.

        ``mcpx_call`` reports it as the server reports a tool it lacks (whose
        ``-32602`` is relayed): an unknown name is a protocol error, in every
        revision (server/tools).  ``mcpx_search`` and ``mcpx_describe`` report
        unknown names, servers and tools alike, as their own ``isError`` results.
        """
        if server is None or server in self._catalogs:
            return None
        configured = ", ".join(self._catalogs) or "none"
        message = (
            f"mcpx has no server named {server!r}; its servers are: {configured} (mcpx_servers lists them)"
        )
        if call:
            return GatewayError(
                code=INVALID_PARAMS, message=message, data={"server": server, "kind": "unknown-server"}
            )
        return _tool_error(message)

    def _server_entry(self, catalog: UpstreamCatalog) -> dict[str, Any]:
        entry: dict[str, Any] = {"name": catalog.name, "status": catalog.status}
        if catalog.detail:
            entry["detail"] = catalog.detail
        entry.update(
            era=catalog.revision.era.value if catalog.revision is not None else None,
            revision=str(catalog.revision) if catalog.revision is not None else None,
            passthrough=catalog.name in self._passthrough,
            tools=sum(1 for _ in _named_entries(catalog.tools)),
            prompts=sum(1 for _ in _named_entries(catalog.prompts)),
            resources=sum(1 for _ in _named_entries(catalog.resources, "uri")),
            resourceTemplates=sum(1 for _ in _named_entries(catalog.resource_templates, "uriTemplate")),
            capabilities=dict(catalog.capabilities),
        )
        return entry

    def _search(self, query: str, server: str | None, limit: int) -> Answer:
        words = _words(query)
        scored: list[tuple[int, int, dict[str, Any]]] = []
        catalogs = [self._catalogs[server]] if server is not None else list(self._catalogs.values())
        for catalog in catalogs:
            for tool in _named_entries(catalog.tools):
                score = _score(words, tool)
                if score is None:
                    continue
                found: dict[str, Any] = {"server": catalog.name, "name": tool["name"]}
                title = tool.get("title") or _annotation_title(tool)
                if isinstance(title, str):
                    found["title"] = title
                description = tool.get("description")
                if isinstance(description, str):
                    if len(description) > _SEARCH_DESCRIPTION_CHARS:
                        description = description[:_SEARCH_DESCRIPTION_CHARS] + "… (mcpx_describe shows all)"
                    found["description"] = description
                scored.append((-score, len(scored), found))
        scored.sort(key=lambda s: (s[0], s[1]))
        tools = [found for _, _, found in scored[:limit]]
        return Answer(result=_structured({"query": query, "total": len(scored), "tools": tools}))

    def _describe(self, server: str, name: str) -> Answer:
        catalog = self._catalogs[server]
        tool = catalog.tool(name)
        if tool is None:
            names = [t["name"] for t in _named_entries(catalog.tools)]
            shown = ", ".join(names[:20]) + (f" and {len(names) - 20} more" if len(names) > 20 else "")
            listed = f"its tools are: {shown}" if names else f"it lists no tools (status: {catalog.status})"
            return _tool_error(
                f"server {server!r} lists no tool named {name!r}; {listed} (mcpx_search finds tools by words)"
            )
        return Answer(result=_structured({"server": server, "tool": dict(tool)}))

    # -- prompts/get ----------------------------------------------------------

    def get_prompt(self, params: Mapping[str, Any]) -> Route | GatewayError:
        """``prompts/get``: the upstream that answers it, under the name it knows."""
        name = params.get("name")
        if not isinstance(name, str):
            return GatewayError(
                code=INVALID_PARAMS, message="Invalid params: prompts/get needs params.name, a string"
            )
        owner = self._prompt_owner.get(name)
        if owner is not None:
            return Route(server=owner, method="prompts/get", params=dict(params), rewrite_uris=False)
        alias = self._prompt_alias.get(name)
        if alias is not None:
            return Route(
                server=alias[0], method="prompts/get", params={**params, "name": alias[1]}, rewrite_uris=False
            )
        collision = self._colliding.get(("prompt", name))
        if collision is not None:
            return _collision_error(collision, "prompts/get")
        namespace, sep, prompt = name.partition("_")
        if sep and prompt and namespace in self._catalogs:
            return Route(
                server=namespace, method="prompts/get", params={**params, "name": prompt}, rewrite_uris=True
            )
        if self._passthrough:
            return Route(
                server=self._passthrough[0], method="prompts/get", params=dict(params), rewrite_uris=False
            )
        return GatewayError(
            code=INVALID_PARAMS,
            message=(
                f"Unknown prompt: no prompt named {name!r}; prompts/list shows the prompts on offer, "
                "each named <server>_<prompt>"
            ),
            data={"name": name},
        )

    # -- resources --------------------------------------------------------------

    def route_resource(
        self, params: Mapping[str, Any], method: str = "resources/read"
    ) -> Route | OwnResource | GatewayError:
        """``resources/read`` (or ``resources/subscribe``/``unsubscribe``): who serves ``params.uri``."""
        uri = params.get("uri")
        if not isinstance(uri, str):
            return GatewayError(
                code=INVALID_PARAMS, message=f"Invalid params: {method} needs params.uri, a string"
            )
        if uri[: len(_SCHEME)].lower() == _SCHEME:
            try:
                namespace, inner = parse_mcpx_uri(uri)
            except McpxUriError as exc:
                return GatewayError(code=INVALID_PARAMS, message=f"Invalid params: {exc}", data={"uri": uri})
            if namespace == OWN_NAMESPACE:
                return OwnResource(uri=uri, path=inner)
            if namespace not in self._catalogs:
                configured = ", ".join(self._catalogs) or "none"
                return GatewayError(
                    code=RESOURCE_NOT_FOUND,
                    message=(
                        f"Resource not found: {_clip(uri)!r} names server {namespace!r}, which mcpx does not "
                        f"have (its servers: {configured}); resources/list shows every resource mcpx serves"
                    ),
                    data={"uri": uri},
                )
            return Route(server=namespace, method=method, params={**params, "uri": inner}, rewrite_uris=True)
        if self._passthrough:
            server = next(
                (name for name in self._passthrough if self._offers(name, uri)),
                self._passthrough[0],
            )
            return Route(server=server, method=method, params=dict(params), rewrite_uris=False)
        owner = next((name for name in self._catalogs if self._offers(name, uri)), None)
        hint = (
            f"mcpx serves it as {mcpx_uri(owner, uri)}"
            if owner is not None
            else "resources/list shows what mcpx serves, as mcpx://<server>/<percent-encoded URI>"
        )
        return GatewayError(
            code=RESOURCE_NOT_FOUND,
            message=f"Resource not found: {_clip(uri)!r} is not an mcpx:// URI; {hint}",
            data={"uri": uri},
        )

    def _offers(self, server: str, uri: str) -> bool:
        """Whether ``server`` lists ``uri`` or has a template it falls under (spec/gateway.md §2)."""
        return uri in self._resource_uris[server] or any(
            template_matches(template, uri) for template in self._template_strings[server]
        )


# ----------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------


def _forwarded(params: Mapping[str, Any]) -> Mapping[str, Any]:
    # ``task`` asks mcpx, not the upstream, to run the call as a task (spec/gateway.md §6).
    # Read only, as a Route's params are: the host's own params when there is nothing to drop.
    if "task" not in params:
        return params
    return {key: value for key, value in params.items() if key != "task"}


_WORD: Final = re.compile(r"[^\W_]+")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.casefold())


def _annotation_title(tool: Mapping[str, Any]) -> Any:
    annotations = tool.get("annotations")
    return annotations.get("title") if isinstance(annotations, Mapping) else None


def _score(words: Sequence[str], tool: Mapping[str, Any]) -> int | None:
    """How well ``tool`` matches every one of ``words`` (name 3, title 2, description 1); ``None`` if not all."""
    fields = [
        (3, tool.get("name")),
        (2, tool.get("title")),
        (2, _annotation_title(tool)),
        (1, tool.get("description")),
    ]
    texts = [(weight, " ".join(_words(value))) for weight, value in fields if isinstance(value, str)]
    score = 0
    for word in words:
        best = max((weight for weight, text in texts if word in text), default=0)
        if best == 0:
            return None
        score += best
    return score
