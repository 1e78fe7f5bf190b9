"""The gateway: the daemon's MCP surface over a pool of upstream servers, and its /v1 API.

``run_daemon`` serves both on one listener; ``Upstreams`` drives the pool;
``GatewayServer`` is the MCP server hosts talk to.  The pure parts live in
``mcpx.core`` (``GatewaySurface``, ``Pool``).
"""

from ._daemon import DAEMON_FILE, Ops, run_daemon
from ._server import GatewayServer
from ._upstreams import Upstreams

__all__ = ["DAEMON_FILE", "GatewayServer", "Ops", "Upstreams", "run_daemon"]
