"""The gateway's surface built from its upstreams' catalogs: names merged, collisions found, lists paged.

The lowest layer of ``GatewaySurface`` (gateway.py, where the rules are):
built once per snapshot of the catalogs, it merges what the pass-through
servers offer under their own names — a tool or prompt name two of them
offer is shown as a ``<server>_<name>`` alias for each, a URI as it is for
the first and as an ``mcpx://`` URI for the others (``Collision``;
spec/gateway.md §2) — and pages every list with signed cursors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from .errors import LocalProtocolError
from .gateway_cursors import _Cursors, _fingerprint
from .gateway_results import CollisionKind, GatewayError, ListKind, Page, UpstreamCatalog, _named_entries
from .gateway_tools import _TOOLS_BY_NAME, GATEWAY_TOOL_NAMES
from .gateway_uris import mcpx_uri, mcpx_uri_template

_DEFAULT_PAGE_SIZE: Final = 100


@dataclass(frozen=True, slots=True)
class _Listing:
    items: tuple[Mapping[str, Any], ...]
    fingerprint: str


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


class _Lists:
    """The surface as built: its listings, collisions and paging (see ``GatewaySurface``)."""

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
