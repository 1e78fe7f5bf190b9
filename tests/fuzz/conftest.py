"""Report how many hypothesis examples tests/fuzz ran (``tox -e fuzz`` quotes the total).

Each property calls ``_examples.tick()`` per example; the terminal summary
prints the count per test and the total.  Under pytest-xdist the workers hand
their counts to the controller through ``workeroutput``.

The per-test timeout (``timeout = 120`` in pyproject.toml) is sized for the
default profile; the fuzz profile runs fifteen times as many examples, so the
properties here get a timeout that grows with ``max_examples``.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import settings

from ._examples import COUNTS, OUTCOMES

_KEY = "mcpx_fuzz_examples"
_OUTCOMES_KEY = "mcpx_fuzz_outcomes"
_SECONDS_PER_EXAMPLE = 0.15  # the slowest property needs about 0.03 s an example on a quiet machine


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    budget = max(120, round(settings.default.max_examples * _SECONDS_PER_EXAMPLE))
    for item in items:
        if "tests/fuzz/" in item.nodeid and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(budget))


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: hand the counts to the controller
        workeroutput[_KEY] = dict(COUNTS)
        workeroutput[_OUTCOMES_KEY] = dict(OUTCOMES)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    COUNTS.update(getattr(node, "workeroutput", {}).get(_KEY, {}))
    OUTCOMES.update(getattr(node, "workeroutput", {}).get(_OUTCOMES_KEY, {}))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if not COUNTS:
        return
    total = sum(COUNTS.values())
    terminalreporter.write_sep("-", f"tests/fuzz: {total:,} hypothesis examples")
    for test, count in sorted(COUNTS.items()):
        terminalreporter.write_line(f"{count:>9,}  {test}")
    if OUTCOMES:
        # One line per entry point and class of bad input: how many, and every answer they got.
        grouped: dict[str, tuple[int, set[str]]] = {}
        for line, count in OUTCOMES.items():
            key, _, result = line.rpartition(" | ")
            seen, answers = grouped.get(key, (0, set()))
            grouped[key] = (seen + count, answers | set(result.split()))
        terminalreporter.write_sep("-", "tests/fuzz: bad input per entry point | class | answers seen")
        for key, (count, answers) in sorted(grouped.items()):
            terminalreporter.write_line(f"{count:>9,}  {key} | {' '.join(sorted(answers))}")
