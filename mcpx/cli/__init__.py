"""The ``mcpx`` command line: ``main`` (the console script) and ``app``, the typer application.

``main`` tries a command's fast path before it builds ``app``
(mcpx/cli/_entry.py), and ``app`` is imported on first use: importing this
package costs neither typer nor ``mcpx.core``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._entry import main

if TYPE_CHECKING:
    from ._main import app

__all__ = ["app", "main"]


def __getattr__(name: str) -> Any:
    if name == "app":
        from ._main import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
