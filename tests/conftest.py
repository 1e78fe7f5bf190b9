"""Shared test configuration: hypothesis profiles and the schema directory."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parent.parent

settings.register_profile("default", max_examples=200, deadline=None)
settings.register_profile(
    "fuzz",
    max_examples=int(os.environ.get("MCPX_FUZZ_EXAMPLES", "3000")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def schemas_dir() -> Path:
    """The official MCP schemas: ``$MCPX_SCHEMAS``, else ``../shared/mcp-schemas``."""
    configured = os.environ.get("MCPX_SCHEMAS")
    return Path(configured) if configured else ROOT.parent / "shared" / "mcp-schemas"
