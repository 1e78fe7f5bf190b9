"""The process-wide strict schema sweep used by the conversation suite.

``SWEEP`` validates every frame a test peer receives from mcpx.  When the
official schemas are not where the tests look for them (``$MCPX_SCHEMAS`` or
``../shared/mcp-schemas``), ``SWEEP`` is a no-op that records why, and the
end-of-run summary says so instead of reporting counts.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from tests.conftest import schemas_dir
from tests.schema_sweep import SchemaSweep


class _Disabled:
    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.counts: Counter[str] = Counter()
        self.exemptions: Counter[str] = Counter()
        self.violations: Counter[str] = Counter()

    def validate_sent(self, frame: dict[str, Any], revision: str, method: str | None) -> None:
        return None


_root = schemas_dir()
SWEEP: SchemaSweep | _Disabled = (
    SchemaSweep(_root)
    if (_root / "2026-07-28" / "schema.json").is_file()
    else _Disabled(f"official schemas not found at {_root}; set MCPX_SCHEMAS to the mcp-schemas directory")
)
