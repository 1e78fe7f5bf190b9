"""The gateway: the daemon's MCP surface over a pool of upstream servers, and its /v1 API.

``run_daemon`` serves both on one listener; ``Upstreams`` drives the pool;
``GatewayServer`` is the MCP server hosts talk to.  The pure parts live in
``mcpx.core`` (``GatewaySurface``, ``Pool``).

The names are imported on first use, so that ``mcpx serve`` (``_shim``, which
needs the standard library only) starts without loading the daemon.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._state import DAEMON_FILE

if TYPE_CHECKING:
    from ._daemon import Ops, run_daemon
    from ._server import GatewayServer
    from ._upstreams import Upstreams

__all__ = ["DAEMON_FILE", "GatewayServer", "Ops", "Upstreams", "run_daemon"]

_LAZY = {"Ops": "._daemon", "run_daemon": "._daemon", "GatewayServer": "._server", "Upstreams": "._upstreams"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module, __name__), name)
