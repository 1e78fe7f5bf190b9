"""What a setting accepts, and how its value is shown: the kinds of the settings table.

``SettingDef.kind`` (``mcpx/config/_settings.py``) names one of these: a
duration (``30s``, ``1.5m``, ``250ms``), a boolean, an integer in a range,
text matching a pattern, a revision or a list of them, server names,
strings, a path, the daemon's endpoint.  Each parses the text or TOML/JSON
value a layer gives and says, when it cannot, what is allowed; each shows a
value back as it would be written.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from ._endpoint import ENDPOINT_FORMS, DaemonEndpoint, parse_endpoint

if TYPE_CHECKING:
    from ..core import Revision

# Server names (mcp.passthrough) follow the namespace rule of ``_servers``.
SERVER_NAME: Final = re.compile(r"[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?\Z")
SERVER_NAME_RULE: Final = (
    "lowercase letters, digits and '-', starting with a letter and not ending with '-', at most 63 characters"
)


_DURATION_PART: Final = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT: Final = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def parse_duration(raw: object) -> float:
    """Seconds, from a number (seconds) or a duration text: ``90``, ``90s``, ``2m``, ``1h30m``, ``500ms``."""
    if isinstance(raw, bool):
        raise ValueError("not a duration")
    if isinstance(raw, int | float):
        seconds = float(raw)
    elif isinstance(raw, str):
        text = raw.strip()
        try:
            seconds = float(text)
        except ValueError:
            pos, seconds = 0, 0.0
            for match in _DURATION_PART.finditer(text):
                if match.start() != pos:
                    break
                seconds += float(match.group(1)) * _UNIT[match.group(2)]
                pos = match.end()
            if pos != len(text) or not text:
                raise ValueError("not a duration") from None
    else:
        raise ValueError("not a duration")
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError("not a duration")
    return seconds


def format_duration(seconds: float) -> str:
    """The shortest spelling ``parse_duration`` reads back: ``2m``, ``1m30s``, ``500ms``, ``0s``."""
    if seconds == 0:
        return "0s"
    if seconds < 1:
        return f"{seconds * 1000:g}ms"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    out = ""
    if hours:
        out += f"{int(hours)}h"
    if minutes:
        out += f"{int(minutes)}m"
    if secs:
        out += f"{round(secs, 3):g}s"
    return out


def _items(raw: object) -> list[str]:
    """A list from a TOML/JSON array, or from comma-separated text."""
    if isinstance(raw, str):
        return [v.strip() for v in raw.split(",") if v.strip()]
    if isinstance(raw, list | tuple) and all(isinstance(v, str) for v in raw):
        return [v.strip() for v in raw]
    raise ValueError("not a list of strings")


@dataclass(frozen=True, slots=True)
class _Kind:
    """How one setting's raw values are checked and shown.

    ``parse`` raises ``ValueError`` whose text completes "…: <text>"; ``allowed``
    says what would have been accepted (a function for the text that names
    mcpx.core's revisions, so that it is built only for a message).
    """

    allowed: str | Callable[[], str]
    parse: Callable[[object], Any]
    show: Callable[[Any], str]
    json: Callable[[Any], Any] = field(default=lambda v: v)


def _duration(*, positive: bool = False) -> _Kind:
    def parse(raw: object) -> float:
        seconds = parse_duration(raw)
        if positive and seconds == 0:
            raise ValueError("must be more than 0s")
        return seconds

    floor = " (more than 0s)" if positive else ""
    return _Kind(
        allowed=f"a duration: seconds (120) or 90s, 2m, 1h30m, 500ms{floor}",
        parse=parse,
        show=format_duration,
    )


def _boolean() -> _Kind:
    """true or false: a TOML/JSON boolean, or from the environment and flags the words for them."""
    words = {
        "true": True,
        "1": True,
        "yes": True,
        "on": True,
        "false": False,
        "0": False,
        "no": False,
        "off": False,
    }

    def parse(raw: object) -> bool:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.strip().lower() in words:
            return words[raw.strip().lower()]
        raise ValueError("not true or false")

    return _Kind(
        allowed="true or false (also 1/0, yes/no, on/off)", parse=parse, show=lambda v: str(v).lower()
    )


def _integer(low: int, high: int | None = None) -> _Kind:
    def parse(raw: object) -> int:
        if isinstance(raw, bool):
            raise ValueError("not a whole number")
        if isinstance(raw, int):
            value = raw
        elif isinstance(raw, str) and re.fullmatch(r"\s*-?\d+\s*", raw):
            value = int(raw)
        else:
            raise ValueError("not a whole number")
        if value < low or (high is not None and value > high):
            raise ValueError("out of range")
        return value

    span = f"{low} or more" if high is None else f"{low} to {high}"
    return _Kind(allowed=f"a whole number, {span}", parse=parse, show=str)


def _text(pattern: str, what: str) -> _Kind:
    compiled = re.compile(pattern)

    def parse(raw: object) -> str:
        if not isinstance(raw, str) or not compiled.fullmatch(raw.strip()):
            raise ValueError(f"not {what}")
        return raw.strip()

    return _Kind(allowed=what, parse=parse, show=str)


def _revisions() -> tuple[Revision, ...]:
    from ..core.revisions import REVISIONS

    return REVISIONS


def _revision_list(complete: bool) -> _Kind:
    def parse(raw: object) -> tuple[Revision, ...]:
        out: list[Revision] = []
        for item in _items(raw):
            rev = _revision(item)
            if rev in out:
                raise ValueError(f"{rev} is listed twice")
            out.append(rev)
        if complete:
            out += [rev for rev in reversed(_revisions()) if rev not in out]
        return tuple(out)

    what = (
        "revisions in the order their rules win (the rest follow, newest first)" if complete else "revisions"
    )
    return _Kind(
        allowed=lambda: f"comma-separated {what}; valid revisions are {', '.join(_revisions())}",
        parse=parse,
        show=lambda v: ",".join(v) or "(none)",
        json=lambda v: [str(r) for r in v],
    )


def _revision(text: str) -> Revision:
    from ..core.revisions import parse_revision

    try:
        return parse_revision(text)
    except ValueError:
        raise ValueError(f"{text!r} is not an MCP revision") from None


def _optional_revision() -> _Kind:
    def parse(raw: object) -> Revision | None:
        if not isinstance(raw, str):
            raise ValueError("not a revision")
        return _revision(raw.strip()) if raw.strip() else None

    return _Kind(
        allowed=lambda: f"one revision: {', '.join(_revisions())}",
        parse=parse,
        show=lambda v: "(none)" if v is None else str(v),
        json=lambda v: None if v is None else str(v),
    )


def _name_list() -> _Kind:
    def parse(raw: object) -> tuple[str, ...]:
        out: list[str] = []
        for item in _items(raw):
            if not SERVER_NAME.match(item):
                raise ValueError(f"{item!r} is not a server name")
            if item in out:
                raise ValueError(f"{item} is listed twice")
            out.append(item)
        return tuple(out)

    return _Kind(
        allowed=f"comma-separated names of configured servers ({SERVER_NAME_RULE})",
        parse=parse,
        show=lambda v: ",".join(v) or "(none)",
        json=list,
    )


def _string_list(what: str) -> _Kind:
    def parse(raw: object) -> tuple[str, ...]:
        items = _items(raw)
        if any(not item or any(ch.isspace() for ch in item) for item in items):
            raise ValueError("an item is empty or contains spaces")
        return tuple(items)

    return _Kind(
        allowed=f"comma-separated {what}", parse=parse, show=lambda v: ",".join(v) or "(none)", json=list
    )


def _path() -> _Kind:
    def parse(raw: object) -> str:
        if not isinstance(raw, str) or not raw.strip() or "\0" in raw:
            raise ValueError("not a path")
        return raw.strip()

    return _Kind(allowed="a directory path (~ is your home directory)", parse=parse, show=str)


def _endpoint() -> _Kind:
    def parse(raw: object) -> DaemonEndpoint | None:
        if not isinstance(raw, str):
            raise ValueError("not a daemon endpoint")
        return parse_endpoint(raw) if raw.strip() else None

    return _Kind(
        allowed=f"{ENDPOINT_FORMS} (empty: this machine's daemon)",
        parse=parse,
        show=lambda v: "(local)" if v is None else str(v),
        json=lambda v: None if v is None else str(v),
    )
