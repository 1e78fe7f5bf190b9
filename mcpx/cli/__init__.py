"""The ``mcpx`` command line (typer)."""

from ._main import app, main

__all__ = ["app", "main"]
