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

Modules: the surface's face is here (``GatewaySurface``: where each request
goes, and the answers of the gateway's own tools); beside it, one module per
subject:

===================== =====================================================
``gateway_results``   what the surface answers with (``Page``, ``Route``,
                      ``Answer``, ``OwnResource``, ``GatewayError``) and
                      what it is built from (``UpstreamCatalog``)
``gateway_cursors``   the cursors of its lists, signed with the caller's key
``gateway_lists``     the surface built from the catalogs: names merged,
                      collisions found, the lists paged (``_Lists``, the
                      layer ``GatewaySurface`` stands on)
``gateway_uris``      ``mcpx://`` URIs
``gateway_tools``     the definitions of the gateway's own tools
===================== =====================================================

Every public name is importable from this module.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from .errors import INVALID_PARAMS, RESOURCE_NOT_FOUND
from .gateway_lists import _COLLISION_LIST, Collision, _Lists
from .gateway_results import (
    _LIST_METHODS,
    OWN_NAMESPACE,
    Answer,
    GatewayError,
    ListKind,
    OwnResource,
    Page,
    Route,
    UpstreamCatalog,
    _named_entries,
    _route,
    _tool_error,
)
from .gateway_tools import _SEARCH_LIMIT, _check_arguments, _structured
from .gateway_uris import _SCHEME, McpxUriError, _clip, mcpx_uri, parse_mcpx_uri, template_matches
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


_SEARCH_DESCRIPTION_CHARS: Final = 300


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


class GatewaySurface(_Lists):
    """What mcpx offers a host over a snapshot of its upstreams' catalogs, and where requests go.

    Build one per snapshot: ``catalogs`` in configuration order,
    ``passthrough`` the servers offered under their own names (in the order
    given), ``cursor_key`` the HMAC key cursors are signed with (per daemon
    process, from the caller), ``page_size`` the longest page of a list.
    Then answer each host request with the matching method and act on the
    value it returns (see the module docstring).  Nothing here changes after
    construction.
    """

    def forwarded_tool(self, name: str) -> tuple[str, str] | None:
        """``(server, its own name)`` for a tool a host's ``tools/call`` forwards by its name alone.

        A pass-through tool the catalogs list under ``name`` (spec/gateway.md
        §2: as itself, or an alias): ``call_tool`` routes any call of it there,
        whatever its arguments, with nothing to rewrite in its result.
        ``None`` for any other name (a gateway tool, a collision, a name no
        catalog lists).
        """
        owner = self._tool_owner.get(name)
        if owner is not None:
            return owner, name
        return self._tool_alias.get(name)

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
