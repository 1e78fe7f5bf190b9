"""spec.precedence, spec.lenient and spec.first.

What they decide is in spec/revision-conflicts.md; the settings themselves in
spec/configuration.md, "Settings".
"""

from __future__ import annotations

import pytest

from mcpx.core import Revision
from mcpx.core.policy import AtOrAfter, Before, Between, Only, SpecPolicy

R24, R25A, R25B, R25C, R26 = list(Revision)


def test_default_is_newest_first_and_everything_strict() -> None:
    policy = SpecPolicy.default()
    assert policy.precedence == (R26, R25C, R25B, R25A, R24)
    assert policy.first() is R26
    assert all(policy.strict(rev) for rev in Revision)


def test_a_partial_precedence_is_completed_newest_first() -> None:
    policy = SpecPolicy.build(precedence=["2025-03-26", "2024-11-05"])
    assert policy.precedence == (R25A, R24, R26, R25C, R25B)


def test_first_moves_one_revision_to_the_front() -> None:
    policy = SpecPolicy.build(precedence=["2025-03-26"], first="2024-11-05")
    assert policy.precedence == (R24, R25A, R26, R25C, R25B)
    assert policy.first() is R24


def test_lenient_revisions_are_not_strict() -> None:
    policy = SpecPolicy.build(lenient=["2024-11-05", "2025-03-26"])
    assert not policy.strict(R24) and not policy.strict(R25A) and policy.strict(R26)
    assert policy.describe() == {
        "precedence": ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"],
        "lenient": ["2024-11-05", "2025-03-26"],
        "first": "2026-07-28",
    }


@pytest.mark.parametrize(
    "kwargs, setting",
    [
        ({"precedence": ["2025-13-01"]}, "spec.precedence"),
        ({"lenient": ["draft"]}, "spec.lenient"),
        ({"first": "2026-07-29"}, "spec.first"),
    ],
)
def test_an_unknown_revision_is_refused_with_the_valid_ones(kwargs: dict[str, object], setting: str) -> None:
    with pytest.raises(ValueError) as info:
        SpecPolicy.build(**kwargs)  # type: ignore[arg-type]
    message = str(info.value)
    assert setting in message
    assert all(str(rev) in message for rev in Revision)


def test_a_revision_listed_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="twice"):
        SpecPolicy.build(precedence=["2025-03-26", "2025-03-26"])


def test_predicates() -> None:
    assert AtOrAfter(R25B)(R25C) and not AtOrAfter(R25B)(R25A)
    assert Before(R25B)(R25A) and not Before(R25B)(R25B)
    assert Only(R24, R26)(R26) and not Only(R24, R26)(R25C)
    assert Between(R25A, R25C)(R25B) and Between(R25A, R25C)(R25C) and not Between(R25A, R25C)(R26)
    policy = SpecPolicy.build(first="2025-06-18")
    assert policy.first_is(Between(R25A, R25C)) and not policy.first_is(AtOrAfter(R26))
    assert policy.winner([R24, R26]) is R26 and policy.winner([R24, R25B]) is R25B


def test_revisions_order_by_release_not_by_spelling() -> None:
    assert sorted([R26, R24, R25C, R25A, R25B]) == [R24, R25A, R25B, R25C, R26]
    assert R24 < R26 and R26 >= R25C and [r.order for r in Revision] == [0, 1, 2, 3, 4]
