"""The settings table and how an effective value is chosen: defaults < file < environment < flags.

``SETTINGS`` is the one place that lists every setting: its key, its kind
(which says what values are allowed and how they are spelled), its default,
its environment variable and flag, and what it does.  ``spec/configuration.md``
describes the same table in prose; ``tests/unit/test_config.py`` checks that
every key here is documented there.

Environment variables are ``MCPX_`` + the key in upper snake case
(``pool.callTimeout`` → ``MCPX_POOL_CALL_TIMEOUT``), except three named after
their flags (spec/configuration.md, "Settings"): ``spec.first`` is
``MCPX_MCP_SPEC`` (like ``--mcp-spec``), ``state.dir`` is ``MCPX_STATE`` and
``daemon.endpoint`` is ``MCPX_DAEMON`` (like ``--daemon``).  An empty
environment variable counts as unset.  Values from the environment and from
flags are text (lists comma-separated); values from a file may be TOML/JSON
values of the right type or the same text.

``resolve_settings`` is pure: it takes the file's raw values, the environment
and the flags as arguments and returns ``Settings`` — each value with the
layer it came from (``Source``) and the exact origin (a file path, a variable,
a flag).  Every bad value is reported, not just the first, each with the key,
the value, where it came from and what is allowed.

Nothing here imports ``mcpx.core`` until a revision is parsed or shown, or a
default taken from it is read (``spec.precedence``, ``transport.maxLine``):
importing ``mcpx.core`` builds every protocol machine, which costs more than
the rest of a short command, and ``mcpx call`` reads the configuration only
to find its daemon (mcpx/cli/_fast.py).  A revision kind's ``allowed`` text
and those defaults are therefore computed when first asked for, and
``Settings`` holds a computed default unevaluated until it is read.

What each kind accepts, and how it shows a value, is ``mcpx/config/_kinds.py``.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ._kinds import (
    _boolean,
    _duration,
    _endpoint,
    _integer,
    _Kind,
    _name_list,
    _optional_revision,
    _path,
    _revision_list,
    _revisions,
    _string_list,
    _text,
    format_duration,
    parse_duration,
)

if TYPE_CHECKING:
    from ..core import Revision
    from ..core.policy import SpecPolicy

__all__ = [
    "NOT_YET",
    "SETTINGS",
    "ConfigError",
    "Setting",
    "SettingDef",
    "Settings",
    "Source",
    "env_name",
    "format_duration",
    "parse_duration",
    "resolve_settings",
    "suggest",
]


class ConfigError(ValueError):
    """The configuration cannot be used; ``problems`` lists every reason, each saying what to change."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        if len(self.problems) == 1:
            text = self.problems[0]
        else:
            text = f"{len(self.problems)} problems in the configuration:\n" + "\n".join(
                f"  - {p}" for p in self.problems
            )
        super().__init__(text)


class Source(enum.StrEnum):
    """The layer an effective value came from, lowest first."""

    DEFAULT = "default"
    FILE = "file"
    ENV = "env"
    FLAG = "flag"


# --------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------


def env_name(key: str) -> str:
    """``MCPX_`` + ``key`` in upper snake case: ``pool.callTimeout`` → ``MCPX_POOL_CALL_TIMEOUT``."""
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", key).replace(".", "_")
    return "MCPX_" + snake.upper()


@dataclass(frozen=True, slots=True)
class _Computed:
    """A default computed each time it is read (from mcpx.core, which is not imported before then)."""

    make: Callable[[], Any]


def _newest_first() -> tuple[Revision, ...]:
    return tuple(reversed(_revisions()))


def _max_line() -> int:
    from ..core.framing import DEFAULT_MAX_LINE

    return DEFAULT_MAX_LINE


@dataclass(frozen=True, slots=True, kw_only=True)
class SettingDef:
    """One row of the settings table.

    ``initial`` is the default as the table writes it: a value, or a
    ``_Computed`` that ``default`` evaluates.
    """

    key: str
    kind: _Kind
    initial: Any
    description: str
    env: str = ""
    flag: str | None = None

    def __post_init__(self) -> None:
        if not self.env:
            object.__setattr__(self, "env", env_name(self.key))

    @property
    def default(self) -> Any:
        """The default value (``None`` for ``state.dir``, whose default depends on the environment)."""
        return self.initial.make() if isinstance(self.initial, _Computed) else self.initial

    @property
    def allowed(self) -> str:
        allowed = self.kind.allowed
        return allowed if isinstance(allowed, str) else allowed()


STATE_DIR_DEFAULT: Final = "$XDG_STATE_HOME/mcpx, else ~/.local/state/mcpx"

SETTINGS: Final[tuple[SettingDef, ...]] = (
    SettingDef(
        key="spec.precedence",
        kind=_revision_list(complete=True),
        initial=_Computed(_newest_first),
        flag="--spec-precedence",
        description="Revisions in the order their rules win a conflict the peer's version does not settle.",
    ),
    SettingDef(
        key="spec.first",
        kind=_optional_revision(),
        initial=None,
        env="MCPX_MCP_SPEC",
        flag="--mcp-spec",
        description="One revision moved to the front of spec.precedence.",
    ),
    SettingDef(
        key="spec.lenient",
        kind=_revision_list(complete=False),
        initial=(),
        flag="--spec-lenient",
        description="Revisions mcpx does not hold strictly (may send fields their schema lacks).",
    ),
    SettingDef(
        key="proto.askTimeout",
        kind=_duration(positive=True),
        initial=600.0,
        description="How long one client request may be held while a question is out.",
    ),
    SettingDef(
        key="proto.askRounds",
        kind=_integer(1, 1000),
        initial=8,
        description="How many times one call may come back asking before it is abandoned.",
    ),
    SettingDef(
        key="proto.stateTTL",
        kind=_duration(positive=True),
        initial=1800.0,
        description="How long a 2026-07-28 requestState may be resumed with.",
    ),
    SettingDef(
        key="pool.callTimeout",
        kind=_duration(positive=True),
        initial=120.0,
        description="How long one upstream call may run (paused while a question is pending).",
    ),
    SettingDef(
        key="pool.idleTimeout",
        kind=_duration(),
        initial=300.0,
        description="How long an unused shared upstream is kept running (0s: stop it after each use).",
    ),
    SettingDef(
        key="pool.drain",
        kind=_duration(),
        initial=10.0,
        description=(
            "How long calls in flight get to finish when the daemon is stopped (mcpx stop, SIGTERM, "
            "Ctrl-C; a second Ctrl-C stops at once); then its upstreams are ended."
        ),
    ),
    SettingDef(
        key="pool.startTimeout",
        kind=_duration(positive=True),
        initial=60.0,
        description=(
            "How long a server may take to start: spawned (or connected), its era probed and its handshake "
            "answered; a call waits as long for it. A server's own startTimeout overrides it."
        ),
    ),
    SettingDef(
        key="pool.backoff",
        kind=_duration(positive=True),
        initial=1.0,
        description=(
            "How long mcpx waits before starting a server again after it crashed or failed to start; "
            "doubled for each further failure in a row, up to 60s (or this, if longer)."
        ),
    ),
    SettingDef(
        key="pool.maxSpawnsPerMinute",
        kind=_integer(1, 10_000),
        initial=30,
        description="How many instances of one server mcpx may start per minute (per server, so one crash-looping server cannot starve the rest).",
    ),
    SettingDef(
        key="pool.spare",
        kind=_boolean(),
        initial=True,
        description=(
            "Keep one instance of each host-, connection- or call-scoped server started ahead of need, "
            "so a new host (or call) does not wait for a start."
        ),
    ),
    SettingDef(
        key="transport.address",
        kind=_text(r"[0-9A-Za-z.:\-\[\]%]+", "a host name or IP address (e.g. 127.0.0.1, ::1, 0.0.0.0)"),
        initial="127.0.0.1",
        flag="--address",
        description="The address the HTTP listener binds; beyond loopback, anyone who can route to it can call tools.",
    ),
    SettingDef(
        key="transport.port",
        kind=_integer(0, 65535),
        initial=8899,
        flag="--port",
        description="The TCP port of the HTTP listener (0 picks a free one).",
    ),
    SettingDef(
        key="transport.allowedOrigins",
        kind=_string_list("Origins (scheme://host[:port])"),
        initial=(),
        description="Origins accepted besides loopback and the bound address (others get 403).",
    ),
    SettingDef(
        key="transport.allowedHosts",
        kind=_string_list("Host header values"),
        initial=(),
        description="Host header values accepted besides loopback and the bound address.",
    ),
    SettingDef(
        key="transport.sseKeepAlive",
        kind=_duration(positive=True),
        initial=15.0,
        description="Silence after which a slow answer becomes an event stream carrying comments.",
    ),
    SettingDef(
        key="transport.ssePollAfter",
        kind=_duration(),
        initial=0.0,
        description=(
            "A gateway call still running after this long has its 2025-11-25 HTTP response stream closed; "
            "the client resumes it with Last-Event-ID (SSE polling). 0s: never."
        ),
    ),
    SettingDef(
        key="transport.stdioDrain",
        kind=_duration(),
        initial=2.0,
        description="How long requests in flight get to answer after stdin closes.",
    ),
    SettingDef(
        key="transport.maxLine",
        kind=_integer(1024),
        initial=_Computed(_max_line),
        description=(
            "The longest stdio line accepted, in bytes; and the longest sent to a stdio server (a request "
            "that mcpx's additions would take past it is refused at once, -32602 too-large)."
        ),
    ),
    SettingDef(
        key="transport.maxBody",
        kind=_integer(1024),
        initial=4 * 1024 * 1024,
        description="The largest HTTP request body accepted, in bytes (413 beyond).",
    ),
    SettingDef(
        key="transport.requestTimeout",
        kind=_duration(positive=True),
        initial=10.0,
        description="How long an HTTP client has to send a request's headers and body (408 beyond).",
    ),
    SettingDef(
        key="mcp.passthrough",
        kind=_name_list(),
        initial=(),
        flag="--passthrough",
        description="Configured servers whose tools, prompts and resources are offered under their own names.",
    ),
    SettingDef(
        key="mcp.listWait",
        kind=_duration(positive=True),
        initial=10.0,
        description=(
            "How long a host's listing waits for a server still starting; then it is served without that "
            "server, whose catalog is read on in the background, and hosts are told (list_changed) when it comes."
        ),
    ),
    SettingDef(
        key="state.dir",
        kind=_path(),
        initial=None,  # computed from the environment: see default_state_dir
        env="MCPX_STATE",
        flag="--state",
        description="Where mcpx keeps its state (era cache, …); created 0700, files 0600.",
    ),
    SettingDef(
        key="daemon.endpoint",
        kind=_endpoint(),
        initial=None,  # the daemon recorded in <state.dir>/daemon.json
        env="MCPX_DAEMON",
        flag="--daemon",
        description=(
            "The daemon `mcpx servers`, `tools`, `call`, `restart` and `status` talk to: "
            "ssh://[user@]host[:port] or http://host:port (default: this machine's)."
        ),
    ),
)

_BY_KEY: Final[Mapping[str, SettingDef]] = {s.key: s for s in SETTINGS}
GROUPS: Final[frozenset[str]] = frozenset(s.key.split(".")[0] for s in SETTINGS)


# Settings that will be rows of the table once what they govern exists.  Set anyway (in the
# file, the environment or a flag), each is refused saying why, never shown as in force.
NOT_YET: Final[Mapping[str, str]] = {
    "proto.askTTL": (
        "it is how long the question broker keeps a parked call and its result, and mcpx has no "
        "broker yet (questions wait on the call that asked them: proto.askTimeout bounds that wait)"
    ),
}


def suggest(word: str, choices: Sequence[str]) -> str:
    """ " (did you mean X?)" when something in ``choices`` is close to ``word``, else ""."""
    import difflib  # only when a name is wrong: not in a daemon's life

    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def not_in_force(key: str, origin: str) -> str:
    """The message for a setting of ``NOT_YET``, set in ``origin``."""
    return f"{key} (in {origin}) is not in force: {NOT_YET[key]}; remove it"


def unknown_setting(key: str, origin: str) -> str:
    """The message for a key that is not a setting."""
    if key in NOT_YET:
        return not_in_force(key, origin)
    group = key.split(".", maxsplit=1)[0]
    if group in GROUPS:
        siblings = ", ".join(s.key for s in SETTINGS if s.key.startswith(group + "."))
        return f"unknown setting {key} (in {origin}){suggest(key, list(_BY_KEY))}; {group} settings are {siblings}"
    return (
        f"unknown setting {key} (in {origin}){suggest(key, list(_BY_KEY))}; "
        f"settings are grouped as {', '.join(sorted(GROUPS))} (see `mcpx settings`)"
    )


def default_state_dir(environ: Mapping[str, str], home: str) -> str:
    """``$XDG_STATE_HOME/mcpx``, else ``<home>/.local/state/mcpx`` (the XDG base directory rule)."""
    base = environ.get("XDG_STATE_HOME") or f"{home.rstrip('/')}/.local/state"
    return f"{base.rstrip('/')}/mcpx"


def expand_home(path: str, home: str) -> str:
    """``~`` and ``~/…`` relative to ``home``; anything else unchanged."""
    if path == "~" or path.startswith("~/"):
        return home.rstrip("/") + path[1:]
    return path


# --------------------------------------------------------------------------
# Effective values
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Setting:
    """One effective value and where it came from (``origin``: a path, a variable, a flag, or "default")."""

    key: str
    value: Any
    source: Source
    origin: str

    @property
    def definition(self) -> SettingDef:
        return _BY_KEY[self.key]

    def text(self) -> str:
        """The value spelled as the file, the environment or a flag would spell it."""
        return self.definition.kind.show(self.value)

    def to_json(self) -> dict[str, Any]:
        return {
            "value": self.definition.kind.json(self.value),
            "source": str(self.source),
            "origin": self.origin,
        }


class Settings(Mapping[str, Setting]):
    """Every setting's effective value with its provenance, in table order.

    An item may be a function that makes its ``Setting`` (a default computed
    from mcpx.core, as ``resolve_settings`` leaves it): it is called, once,
    when the item is first read.
    """

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, Setting | Callable[[], Setting]]) -> None:
        self._items = dict(items)

    def __getitem__(self, key: str) -> Setting:
        item = self._items[key]
        if not isinstance(item, Setting):
            item = self._items[key] = item()
        return item

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Settings({', '.join(f'{k}={s.text()}' for k, s in self.items())})"

    def value(self, key: str) -> Any:
        return self[key].value

    def given(self) -> Iterator[Setting]:
        """Each setting given by the file, the environment or a flag, in table order; no default is computed."""
        for item in self._items.values():
            if isinstance(item, Setting) and item.source is not Source.DEFAULT:
                yield item

    def duration(self, key: str) -> float:
        value = self.value(key)
        assert isinstance(value, float), key
        return value

    def integer(self, key: str) -> int:
        value = self.value(key)
        assert isinstance(value, int), key
        return value

    def names(self, key: str) -> tuple[str, ...]:
        value = self.value(key)
        assert isinstance(value, tuple), key
        return value

    def policy(self) -> SpecPolicy:
        """The revision policy these settings make (spec/revision-conflicts.md)."""
        from ..core.policy import SpecPolicy

        return SpecPolicy.build(
            precedence=self.value("spec.precedence"),
            lenient=self.value("spec.lenient"),
            first=self.value("spec.first"),
        )

    def to_json(self) -> dict[str, Any]:
        return {key: setting.to_json() for key, setting in self.items()}


def _default_setting(definition: SettingDef) -> Callable[[], Setting]:
    """The default ``Setting`` of a computed default, made when ``Settings`` is first asked for it."""
    return lambda: Setting(
        key=definition.key, value=definition.default, source=Source.DEFAULT, origin="default"
    )


def _show_raw(raw: object) -> str:
    return repr(raw) if not isinstance(raw, list | tuple) else repr(list(raw))


def resolve_settings(
    file_values: Mapping[str, object] = {},
    *,
    file_origin: str = "file",
    environ: Mapping[str, str] = {},
    flags: Mapping[str, object] = {},
    flag_origins: Mapping[str, str] = {},
    home: str = "~",
) -> Settings:
    """Each setting's effective value: the default, replaced by the file, the environment, then a flag.

    ``file_values`` maps dotted keys to the file's raw values (``file_origin``
    names the file); ``flags`` maps dotted keys to a flag's text or value
    (``flag_origins`` names the flag spelled, else the table's flag or
    ``--set``).  Raises ``ConfigError`` listing every unknown key and every
    value that is not allowed.
    """
    problems: list[str] = []
    for key in file_values:
        if key not in _BY_KEY:
            problems.append(unknown_setting(key, file_origin))
    for key in NOT_YET:
        if environ.get(env_name(key)):
            problems.append(not_in_force(key, env_name(key)))
    for key in flags:
        if key not in _BY_KEY:
            problems.append(unknown_setting(key, flag_origins.get(key, "--set")))
    out: dict[str, Setting | Callable[[], Setting]] = {}
    for definition in SETTINGS:
        key = definition.key
        chosen: Setting | Callable[[], Setting]
        if isinstance(definition.initial, _Computed):
            chosen = _default_setting(definition)
        else:
            default = default_state_dir(environ, home) if key == "state.dir" else definition.initial
            chosen = Setting(key=key, value=default, source=Source.DEFAULT, origin="default")
        layers: list[tuple[Source, str, object]] = []
        if key in file_values:
            layers.append((Source.FILE, file_origin, file_values[key]))
        if environ.get(definition.env):
            layers.append((Source.ENV, definition.env, environ[definition.env]))
        if key in flags:
            layers.append((Source.FLAG, flag_origins.get(key) or definition.flag or "--set", flags[key]))
        for source, origin, raw in layers:
            try:
                value = definition.kind.parse(raw)
            except ValueError as exc:
                problems.append(
                    f"{key} = {_show_raw(raw)} (from {origin}): {exc}; allowed: {definition.allowed}"
                )
                continue
            if key == "state.dir":
                value = expand_home(value, home)
            chosen = Setting(key=key, value=value, source=source, origin=origin)
        out[key] = chosen
    if problems:
        raise ConfigError(problems)
    return Settings(out)
