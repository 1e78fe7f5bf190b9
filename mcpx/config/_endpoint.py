"""Daemon endpoints: where ``mcpx servers``, ``tools``, ``call``, ``restart`` and ``status`` find a daemon.

Three forms (the ``daemon.endpoint`` setting, ``--daemon``, ``MCPX_DAEMON``):

* none (the default): the daemon of this machine's state directory, found
  through ``<state>/daemon.json``;
* ``http://host:port``: a daemon's ops API (``/v1``) directly;
* ``ssh://[user@]host[:port]``: the CLI runs
  ``ssh [-p port] -- [user@]host mcpx serve --transport stdio`` and speaks MCP
  to the daemon on that host through its stdio shim, with the gateway's own
  tools (``mcpx_servers``, ``mcpx_search``, ``mcpx_describe``, ``mcpx_call``).

An endpoint becomes an ssh command line, so what it may hold is narrow on
purpose: a user and a host of letters, digits, ``.``, ``-`` and ``_`` that
do not start with ``-`` (ssh would read ``-oProxyCommand=…`` as an option,
and runs ``ProxyCommand`` through a shell with the host in it), an IPv6
address in brackets, a numeric port, and nothing else — no password, path,
query or fragment.  The remote command is fixed; ``--`` ends ssh's options
before the destination as a second guard.  Pure: text in, ``DaemonEndpoint``
out, or ``ValueError`` saying what to write instead.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

__all__ = ["ENDPOINT_FORMS", "DaemonEndpoint", "parse_endpoint"]

ENDPOINT_FORMS: Final = "ssh://[user@]host[:port] or http://host:port"
REMOTE_COMMAND: Final = ("mcpx", "serve", "--transport", "stdio")

_NAME: Final = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*\Z")  # a host name or a user name
_IPV6: Final = re.compile(r"\[[0-9A-Fa-f:.]+\]\Z")


@dataclass(frozen=True, slots=True, kw_only=True)
class DaemonEndpoint:
    """A checked daemon endpoint; build it with ``parse_endpoint``."""

    scheme: Literal["http", "ssh"]
    host: str  # as written; an IPv6 address keeps its brackets
    port: int | None = None
    user: str | None = None

    def __str__(self) -> str:
        who = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port is not None else ""
        return f"{self.scheme}://{who}{self.host}{port}"

    @property
    def destination(self) -> str:
        """``[user@]host`` as ssh takes it (an IPv6 address without its brackets)."""
        host = self.host[1:-1] if self.host.startswith("[") else self.host
        return f"{self.user}@{host}" if self.user else host

    def ssh_argv(self, remote: Sequence[str] = REMOTE_COMMAND) -> list[str]:
        """``ssh [-p port] -- [user@]host`` + ``remote`` (by default the daemon's stdio shim)."""
        port = ["-p", str(self.port)] if self.port is not None else []
        return ["ssh", *port, "--", self.destination, *remote]

    @property
    def base_url(self) -> str:
        """``http://host:port``, the root ``/v1`` and ``/health`` hang from (http endpoints)."""
        return f"http://{self.host}:{self.port if self.port is not None else 80}"


def parse_endpoint(text: str) -> DaemonEndpoint:
    """``text`` as an endpoint; ``ValueError`` (completing "…: <reason>") when it is not one.

    Refused, each with what to write instead: another scheme, a missing
    host, a user or host that starts with ``-`` or holds anything ssh or its
    ``ProxyCommand`` shell could read as more than a name, a password, a
    path, a query, a fragment, and a port that is not 1 to 65535.
    """
    raw = text.strip()
    scheme, sep, rest = raw.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in ("http", "ssh"):
        raise ValueError(f"not a daemon endpoint; write {ENDPOINT_FORMS}")
    netloc, _, tail = _split_tail(rest)
    if tail not in ("", "/"):
        if scheme == "ssh":
            raise ValueError(
                f"ssh:// takes no path, query or fragment ({tail!r}): the remote command is always "
                f"`{' '.join(REMOTE_COMMAND)}`"
            )
        raise ValueError(
            f"give the daemon's address without a path, query or fragment ({tail!r}): http://host:port "
            "(the CLI adds /v1; /mcp is for MCP hosts)"
        )
    userinfo, at, hostport = netloc.rpartition("@")
    user: str | None = None
    if at:
        if scheme == "http":
            raise ValueError("an http:// endpoint takes no user name or password; write http://host:port")
        name, colon, _password = userinfo.partition(":")
        if colon:
            raise ValueError("put no password in the endpoint; ssh asks for it or uses your keys")
        user = _checked_name(name, "user", scheme)
    if hostport.startswith("["):
        host, close, after = hostport.partition("]")
        host += close
        if not _IPV6.match(host) or (after and not after.startswith(":")):
            raise ValueError(
                f"{hostport!r} is not an IPv6 address in brackets (e.g. [::1]) with an optional :port"
            )
        port = _checked_port(after[1:]) if after else None
    elif hostport.count(":") > 1:
        raise ValueError(f"write an IPv6 address in brackets: {scheme}://[{hostport}]")
    else:
        host, colon, port_text = hostport.partition(":")
        host = _checked_name(host, "host", scheme)
        port = _checked_port(port_text) if colon else None
    return DaemonEndpoint(scheme="ssh" if scheme == "ssh" else "http", host=host, port=port, user=user)


def _split_tail(rest: str) -> tuple[str, str, str]:
    """``netloc``, the character that ended it, and the path, query and fragment after it."""
    end = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    return rest[:end], rest[end : end + 1], rest[end:]


def _checked_name(name: str, what: str, scheme: str) -> str:
    if not name:
        raise ValueError(f"the {what} is empty; write {ENDPOINT_FORMS}")
    if scheme == "http":
        if not _NAME.match(name):
            raise ValueError(f"the host {name!r} is not a host name or IPv4 address; write http://host:port")
        return name
    if name.startswith("-"):
        raise ValueError(
            f"the {what} {name!r} starts with '-', which ssh would read as an option "
            "(-oProxyCommand=… runs a command); endpoints may not carry ssh options: "
            "put them in ~/.ssh/config under a Host name and use ssh://that-name"
        )
    if not _NAME.match(name):
        raise ValueError(
            f"the {what} {name!r} may hold only letters, digits, '.', '-' and '_' (anything else could "
            "reach ssh as an option or its ProxyCommand shell); put unusual names in ~/.ssh/config "
            "under a Host name and use ssh://that-name"
        )
    return name


def _checked_port(port: str | None) -> int | None:
    if port is None:
        return None
    if not port.isascii() or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"the port {port!r} is not a number from 1 to 65535")
    return int(port)
