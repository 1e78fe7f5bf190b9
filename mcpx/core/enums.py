"""The machines' own states and inputs: enums hashed by identity.

Each machine keys its transition table by ``(state, input)`` and tests a
state's membership in sets, several times per message.  ``enum.Enum``
hashes a member with a Python-level ``__hash__`` (the hash of its name),
so every such lookup costs two Python calls.  A member is a singleton, and
``Enum`` compares by identity (it defines no ``__eq__``), so the identity
hash of ``object`` agrees with equality and costs no Python call at all.
(``StrEnum`` members hash as their string, in C, and need none of this.)
"""

from __future__ import annotations

import enum

__all__ = ["Table"]


class Table(enum.Enum):
    """An ``enum.Enum`` for transition-table keys and state sets: the same members, hashed by identity."""

    __hash__ = object.__hash__
