"""The revision policy: which revision's rules win a conflict, and which are lenient.

Most differences between revisions are settled by the revision the peer
states.  Where two revisions ask for incompatible behaviour and the peer's
version does not settle it, two settings decide (spec/revision-conflicts.md;
spec/configuration.md, "Settings"):

``spec.precedence``
    The revisions in the order their rules win, first wins.  The default is
    newest first.  A partial list is completed with the remaining revisions,
    newest first.  ``spec.first`` (``--mcp-spec``, ``MCPX_MCP_SPEC``) moves one
    revision to the front.
``spec.lenient``
    Revisions mcpx does not hold strictly.  Empty by default: every revision is
    strict, so mcpx never sends a peer a field its revision's schema lacks.

An unknown revision in any of the three is refused with the list of valid
ones.  The conflicts that consult this policy, and the readings recorded for
the others, are listed in ``spec/revision-conflicts.md``.

Predicates (``AtOrAfter``, ``Before``, ``Only``, ``Between``) are small frozen
callables over a ``Revision`` so a rule can say "when the winning revision is
2025-06-18 or later" as ``policy.first_is(AtOrAfter(V2025_06_18))``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .revisions import REVISIONS, Revision, parse_revision

__all__ = ["AtOrAfter", "Before", "Between", "Only", "RevisionPredicate", "SpecPolicy"]


@dataclass(frozen=True, slots=True)
class AtOrAfter:
    floor: Revision

    def __call__(self, rev: Revision) -> bool:
        return rev >= self.floor


@dataclass(frozen=True, slots=True)
class Before:
    ceiling: Revision

    def __call__(self, rev: Revision) -> bool:
        return rev < self.ceiling


@dataclass(frozen=True, slots=True)
class Only:
    revisions: frozenset[Revision]

    def __init__(self, *revisions: Revision) -> None:
        object.__setattr__(self, "revisions", frozenset(revisions))

    def __call__(self, rev: Revision) -> bool:
        return rev in self.revisions


@dataclass(frozen=True, slots=True)
class Between:
    """Inclusive on both ends."""

    low: Revision
    high: Revision

    def __call__(self, rev: Revision) -> bool:
        return self.low <= rev <= self.high


RevisionPredicate = AtOrAfter | Before | Only | Between


def _parse_all(values: Iterable[str | Revision], setting: str) -> list[Revision]:
    out: list[Revision] = []
    for value in values:
        try:
            rev = value if isinstance(value, Revision) else parse_revision(value.strip())
        except ValueError as exc:
            raise ValueError(f"{setting}: {exc}") from None
        if rev in out:
            raise ValueError(f"{setting}: {rev} is listed twice")
        out.append(rev)
    return out


@dataclass(frozen=True, slots=True)
class SpecPolicy:
    """The effective ``spec.*`` settings; build it with ``SpecPolicy.build``."""

    precedence: tuple[Revision, ...]
    lenient: frozenset[Revision]

    @classmethod
    def build(
        cls,
        *,
        precedence: Iterable[str | Revision] = (),
        lenient: Iterable[str | Revision] = (),
        first: str | Revision | None = None,
    ) -> SpecPolicy:
        """Validate and complete the three settings.

        Raises ``ValueError`` naming the valid revisions when any value is not
        one of them.
        """
        order = _parse_all(precedence, "spec.precedence")
        for rev in reversed(REVISIONS):  # complete newest first
            if rev not in order:
                order.append(rev)
        if first is not None:
            (head,) = _parse_all([first], "spec.first")
            order.remove(head)
            order.insert(0, head)
        return cls(precedence=tuple(order), lenient=frozenset(_parse_all(lenient, "spec.lenient")))

    @classmethod
    def default(cls) -> SpecPolicy:
        return cls.build()

    def first(self) -> Revision:
        """The revision whose rules win a conflict the peer's version does not settle."""
        return self.precedence[0]

    def strict(self, rev: Revision) -> bool:
        """Whether mcpx holds ``rev`` strictly (sends nothing its schema lacks)."""
        return rev not in self.lenient

    def first_is(self, predicate: RevisionPredicate) -> bool:
        return predicate(self.precedence[0])

    def winner(self, candidates: Iterable[Revision]) -> Revision:
        """Of ``candidates``, the one that comes first in ``spec.precedence``."""
        pool = set(candidates)
        for rev in self.precedence:
            if rev in pool:
                return rev
        raise ValueError("winner() needs at least one candidate revision")

    def describe(self) -> dict[str, object]:
        """The policy as JSON-ready data (served by ``GET /v1/protocol`` later)."""
        return {
            "precedence": [str(r) for r in self.precedence],
            "lenient": [str(r) for r in REVISIONS if r in self.lenient],
            "first": str(self.first()),
        }
