"""Count the examples each property runs, for the closing summary of a fuzz run.

Every property calls ``tick()`` once per example (a state machine once per
run); ``tests/fuzz/conftest.py`` prints the totals.  Keyed by the pytest node
id of the running test, read from ``PYTEST_CURRENT_TEST``.
"""

from __future__ import annotations

import os
from collections import Counter

COUNTS: Counter[str] = Counter()
OUTCOMES: Counter[str] = Counter()
"""``entry point | class of bad input | what came back`` -> how many frames, for the closing summary."""


def tick() -> None:
    """One more example of the test that is running now."""
    current = os.environ.get("PYTEST_CURRENT_TEST", "<outside pytest> (call)")
    COUNTS[current.rsplit(" ", 1)[0]] += 1


def outcome(entry: str, kind: str, result: str) -> None:
    """One bad frame of class ``kind`` sent to ``entry``, answered with ``result`` (e.g. ``400 -32700``)."""
    OUTCOMES[f"{entry} | {kind} | {result}"] += 1
