"""The configuration file, layered settings with provenance, and the state directory (spec/configuration.md)."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpx.config import (
    SETTINGS,
    AuthConfigError,
    ConfigError,
    Scope,
    Source,
    UpstreamServer,
    config_location,
    default_state_dir,
    detect_format,
    ensure_state_dir,
    env_name,
    format_duration,
    load_config,
    parse_config,
    parse_duration,
    resolve_settings,
    write_state_file,
)
from mcpx.core import Revision
from mcpx.core.revisions import REVISIONS

ROOT = Path(__file__).resolve().parents[2]
SECRET = "ghp-very-secret-token"
ENV = {"GITHUB_TOKEN": SECRET}

TOML = """
[servers.files]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]
env = { LOG_LEVEL = "debug" }
cwd = "/srv"

[servers.github]
url = "https://api.example.com/mcp"
headers = { X-Team = "blue" }
auth = { type = "bearer", tokenEnv = "GITHUB_TOKEN" }
scope = "connection"
"""

HOST_JSON = json.dumps(
    {
        "mcpServers": {
            "files": {
                "command": "npx",
                "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
                "env": {"LOG_LEVEL": "debug"},
                "cwd": "/srv",
            },
            "github": {
                "type": "http",
                "url": "https://api.example.com/mcp",
                "headers": {"X-Team": "blue"},
                "auth": {"type": "bearer", "tokenEnv": "GITHUB_TOKEN"},
                "scope": "connection",
            },
        }
    }
)


def _problems(text: str | None, **kwargs: Any) -> str:
    kwargs.setdefault("environ", ENV)
    with pytest.raises(ConfigError) as refused:
        parse_config(text, **kwargs)
    message = str(refused.value)
    assert SECRET not in message
    return message


# -- one model, two formats -----------------------------------------------------------


def test_toml_and_the_hosts_mcpservers_json_parse_to_the_same_model() -> None:
    from_toml = parse_config(TOML, format="toml", environ=ENV)
    from_json = parse_config(HOST_JSON, format="json", environ=ENV)
    assert dict(from_toml.servers) == dict(from_json.servers)
    files, github = from_toml.servers["files"], from_toml.servers["github"]
    assert files == UpstreamServer(
        name="files",
        command="npx",
        args=("-y", "@modelcontextprotocol/server-filesystem", "/tmp"),
        env=(("LOG_LEVEL", "debug"),),
        cwd="/srv",
        scope=Scope.HOST,
    )
    assert files.transport == "stdio" and files.scope is Scope.HOST  # a command server's default
    assert files.argv() == ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/tmp"]
    assert github.transport == "http" and github.scope is Scope.CONNECTION
    assert github.headers == (("X-Team", "blue"),)
    assert github.auth is not None and github.auth.headers == (("Authorization", f"Bearer {SECRET}"),)


def test_a_command_may_be_an_array_and_mcpservers_is_accepted_in_toml() -> None:
    config = parse_config('[mcpServers.demo]\ncommand = ["python", "-m", "mcpx", "demo"]\n')
    assert config.servers["demo"].argv() == ["python", "-m", "mcpx", "demo"]


def test_host_specific_keys_in_json_are_warnings_but_errors_in_toml() -> None:
    host = json.dumps(
        {
            "globalShortcut": "Ctrl+M",
            "mcpServers": {
                "files": {"command": "npx", "autoApprove": ["read"], "timeout": 60},
                "old": {"command": "x", "disabled": True},
            },
        }
    )
    config = parse_config(host, format="json")
    assert list(config.servers) == ["files"]
    warnings = "\n".join(config.warnings)
    assert "'autoApprove'" in warnings and "'timeout'" in warnings and "'globalShortcut'" in warnings
    assert "mcpServers.old is disabled and left out" in warnings
    message = _problems('[servers.files]\ncommand = "npx"\nautoApprove = ["read"]\n')
    assert "unknown key 'autoApprove'" in message and "a server takes command, args" in message


def test_secrets_stay_out_of_repr_and_json() -> None:
    text = TOML + '\n[servers.local]\ncommand = "x"\nenv = { API_KEY = "literal-secret-9" }\n'
    config = parse_config(text, environ=ENV)
    shown = repr(config) + json.dumps(config.to_json())
    assert SECRET not in shown and "literal-secret-9" not in shown
    assert config.to_json()["servers"]["local"]["env"] == ["API_KEY"]
    assert config.to_json()["servers"]["github"]["auth"]["secretFrom"] == ["env GITHUB_TOKEN"]


def test_process_env_merges_auth_over_the_servers_env() -> None:
    config = parse_config(
        '[servers.s]\ncommand = "x"\nenv = { A = "1", B = "server" }\n'
        'auth = { type = "env", vars = { B = "auth" }, varsEnv = { C = "GITHUB_TOKEN" } }\n',
        environ=ENV,
    )
    assert config.servers["s"].process_env() == {"A": "1", "B": "auth", "C": SECRET}


def test_format_follows_the_name_then_the_first_character() -> None:
    assert detect_format("x/config.json", "") == "json"
    assert detect_format("x/config.TOML", "{") == "toml"
    assert detect_format("x/mcp", '  {"mcpServers": {}}') == "json"
    assert detect_format("x/mcp", "[pool]") == "toml"


# -- layers: default < file < env < flag ------------------------------------------------


def test_each_layer_overrides_the_one_before_and_says_so() -> None:
    file = '[pool]\ncallTimeout = "90s"\n'
    environ = {"MCPX_POOL_CALL_TIMEOUT": "1m"}
    steps = [
        (parse_config(None, found=False), 120.0, Source.DEFAULT, "default"),
        (parse_config(file, origin="/etc/mcpx.toml"), 90.0, Source.FILE, "/etc/mcpx.toml"),
        (parse_config(file, environ=environ), 60.0, Source.ENV, "MCPX_POOL_CALL_TIMEOUT"),
        (
            parse_config(file, environ=environ, flags={"pool.callTimeout": "45"}),
            45.0,
            Source.FLAG,
            "--set",
        ),
    ]
    for config, value, source, origin in steps:
        setting = config.settings["pool.callTimeout"]
        assert (setting.value, setting.source, setting.origin) == (value, source, origin)


def test_the_seeds_spec_settings_and_their_names() -> None:
    settings = resolve_settings(
        {"spec.precedence": ["2025-03-26"]},
        environ={"MCPX_MCP_SPEC": "2024-11-05", "MCPX_SPEC_LENIENT": "2026-07-28"},
    )
    assert settings["spec.precedence"].value == (
        Revision.V2025_03_26,
        Revision.V2026_07_28,
        Revision.V2025_11_25,
        Revision.V2025_06_18,
        Revision.V2024_11_05,
    )
    assert settings["spec.first"].origin == "MCPX_MCP_SPEC"
    policy = settings.policy()
    assert policy.first() is Revision.V2024_11_05
    assert not policy.strict(Revision.V2026_07_28)
    default = resolve_settings()
    assert default.policy() == default.policy().default()
    assert default["spec.precedence"].text() == ",".join(reversed(REVISIONS))


def test_flags_name_the_flag_they_came_from() -> None:
    settings = resolve_settings(flags={"spec.first": "2025-06-18"}, flag_origins={"spec.first": "--mcp-spec"})
    assert (settings["spec.first"].source, settings["spec.first"].origin) == (Source.FLAG, "--mcp-spec")
    settings = resolve_settings(flags={"mcp.passthrough": "demo,tasks"})
    assert settings["mcp.passthrough"].origin == "--passthrough"  # the table's flag
    assert settings["mcp.passthrough"].value == ("demo", "tasks")


def test_an_empty_environment_variable_counts_as_unset() -> None:
    settings = resolve_settings({"pool.callTimeout": 30}, environ={"MCPX_POOL_CALL_TIMEOUT": ""})
    assert settings["pool.callTimeout"].source is Source.FILE


def test_settings_as_dotted_keys_and_as_tables_are_the_same() -> None:
    dotted = parse_config('"pool.callTimeout" = 30\n')
    table = parse_config("[pool]\ncallTimeout = 30\n")
    in_json = parse_config('{"pool": {"callTimeout": "30s"}}', format="json")
    assert {c.settings.duration("pool.callTimeout") for c in (dotted, table, in_json)} == {30.0}


def test_state_dir_defaults_follow_xdg_and_expand_home() -> None:
    assert default_state_dir({}, "/home/ada") == "/home/ada/.local/state/mcpx"
    assert default_state_dir({"XDG_STATE_HOME": "/xdg/state"}, "/home/ada") == "/xdg/state/mcpx"
    settings = resolve_settings(environ={"MCPX_STATE": "~/mcpx-state"}, home="/home/ada")
    assert (settings["state.dir"].value, settings["state.dir"].source) == ("/home/ada/mcpx-state", Source.ENV)


def test_config_location_order() -> None:
    home = "/home/ada"
    assert config_location({}, home) == ("/home/ada/.config/mcpx/config.toml", "default", False)
    assert config_location({"XDG_CONFIG_HOME": "/xdg"}, home)[0] == "/xdg/mcpx/config.toml"
    assert config_location({"MCPX_CONFIG": "~/m.json"}, home) == ("/home/ada/m.json", "MCPX_CONFIG", True)
    assert config_location({"MCPX_CONFIG": "/a.toml"}, home, "/b.toml") == ("/b.toml", "--config", True)


# -- refusals -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("[pool]\ncallTimout = 3\n", ["unknown setting pool.callTimout", "did you mean pool.callTimeout?"]),
        ("[pol]\ncallTimeout = 3\n", ["unknown top-level key 'pol'", "did you mean pool?"]),
        ('[pool]\ncallTimeout = "soon"\n', ["pool.callTimeout = 'soon'", "90s, 2m, 1h30m"]),
        ("[pool]\ncallTimeout = 0\n", ["must be more than 0s"]),
        ("[transport]\nport = 70000\n", ["transport.port = 70000", "0 to 65535"]),
        ("[transport]\nport = true\n", ["transport.port = True", "whole number"]),
        (
            '[spec]\nprecedence = ["2099-01-01"]\n',
            ["'2099-01-01' is not an MCP revision", "valid revisions are " + ", ".join(REVISIONS)],
        ),
        ('[spec]\nlenient = "2025-06-18,2025-06-18"\n', ["2025-06-18 is listed twice"]),
        ('[mcp]\npassthrough = ["nope"]\n', ["mcp.passthrough names 'nope'", "configured servers: none"]),
        ("[servers.My_Server]\ncommand = 'x'\n", ["cannot be used as a namespace", "e.g. 'my-server'"]),
        ("[servers.mcpx]\ncommand = 'x'\n", ["reserved for mcpx's own"]),
        ("[servers.a]\ncommand = 'x'\nurl = 'http://h'\n", ["exactly one of command", "it has both"]),
        ("[servers.a]\nargs = ['x']\n", ["exactly one of command"]),
        ("[servers.a]\nurl = 'ftp://h'\n", ["http:// or https://"]),
        ("[servers.a]\nurl = 'https://u:p@h/mcp'\n", ["carries credentials", "use auth"]),
        ("[servers.a]\nurl = 'https://h'\nheaders = { Mcp-Session-Id = 'x' }\n", ["MCP protocol header"]),
        ("[servers.a]\nurl = 'https://h'\nheaders = { Connection = 'close' }\n", ["hop-by-hop"]),
        ("[servers.a]\nurl = 'https://h'\nauth = { type = 'oauth' }\n", ["oauth is not implemented"]),
        ("[servers.a]\ncommand = 'x'\nauth = { type = 'bearer', token = 't' }\n", ["use type env"]),
        ("[servers.a]\ncommand = 'x'\nscope = 'global'\n", ["use shared, host, connection, call"]),
        ("[servers.a]\ncommand = 'x'\ntype = 'http'\n", ["make them agree"]),
        ("[servers.a]\ncommand = 'x'\nenv = { N = 1 }\n", ["env.N must be a string"]),
        (
            "[servers.a]\nurl = 'https://h'\nheaders = { Authorization = 'x' }\n"
            "auth = { type = 'bearer', tokenEnv = 'GITHUB_TOKEN' }\n",
            ["auth sets authorization and so does headers"],
        ),
        ("[servers\n", ["not valid TOML"]),
    ],
)
def test_refusals_name_the_key_the_value_and_what_is_allowed(text: str, fragments: list[str]) -> None:
    message = _problems(text)
    for fragment in fragments:
        assert fragment in message


def test_a_servers_start_timeout_is_a_duration_in_either_spelling_and_a_bad_one_is_refused() -> None:
    toml = parse_config("[servers.a]\ncommand = 'npx'\nstartTimeout = '2m'\n", environ={})
    host_json = parse_config(
        '{"mcpServers": {"a": {"command": "npx", "startTimeout": 90}}}', format="json", environ={}
    )
    assert toml.servers["a"].start_timeout == 120.0 and host_json.servers["a"].start_timeout == 90.0
    assert toml.servers["a"].describe()["startTimeout"] == "2m"
    assert parse_config("[servers.a]\ncommand = 'npx'\n", environ={}).servers["a"].start_timeout is None
    for bad in ("'soon'", "0", "'-5s'", "true"):
        message = _problems(f"[servers.a]\ncommand = 'npx'\nstartTimeout = {bad}\n")
        assert "servers.a.startTimeout" in message and "more than 0s" in message, message


def test_an_unset_secret_is_a_warning_and_is_read_again_when_the_server_starts() -> None:
    text = "[servers.a]\nurl = 'https://h'\nauth = { type = 'bearer', tokenEnv = 'NOPE' }\n"
    config = parse_config(text, environ={})
    (warning,) = config.warnings
    assert "NOPE, which is not set" in warning and "a cannot start until the daemon has it" in warning
    server = config.servers["a"]
    assert server.auth is None and server.describe()["auth"] == {"type": "bearer", "unset": "NOPE"}
    with pytest.raises(AuthConfigError, match=r"servers\.a\.auth\.tokenEnv names NOPE, which is not set"):
        server.resolved({})
    started = server.resolved({"NOPE": "t0ken"})
    assert started.auth is not None and started.auth.headers == (("Authorization", "Bearer t0ken"),)
    assert started.auth_pending is None and started.url == server.url
    # A block that is wrong whatever the environment is still refused when the file is read.
    assert "unknown key(s) tokenenv" in _problems(
        "[servers.a]\nurl = 'https://h'\nauth = { type = 'bearer', tokenenv = 'NOPE' }\n"
    )
    clash = "[servers.a]\nurl = 'https://h'\nheaders = { Authorization = 'x' }\n"
    clash += "auth = { type = 'bearer', tokenEnv = 'NOPE' }\n"
    with pytest.raises(AuthConfigError, match="auth sets authorization and so does headers"):
        parse_config(clash, environ={}).servers["a"].resolved({"NOPE": "t"})


def test_bad_values_from_the_environment_and_flags_say_where_they_came_from() -> None:
    message = _problems(None, environ={"MCPX_MCP_SPEC": "2099"}, flags={"proto.askRounds": "many"})
    assert "spec.first = '2099' (from MCPX_MCP_SPEC)" in message
    assert "proto.askRounds = 'many' (from --set)" in message
    assert "2 problems" in message
    assert "unknown setting pool.bogus (in --set)" in _problems(None, flags={"pool.bogus": "1"})


def test_a_switch_takes_a_boolean_in_a_file_and_the_usual_words_elsewhere() -> None:
    assert parse_config("[pool]\nspare = false\n").settings.value("pool.spare") is False
    assert parse_config(None, environ={"MCPX_POOL_SPARE": "Off"}).settings.value("pool.spare") is False
    assert parse_config(None, flags={"pool.spare": "yes"}).settings.value("pool.spare") is True
    assert "pool.spare = 'maybe' (from MCPX_POOL_SPARE)" in _problems(
        None, environ={"MCPX_POOL_SPARE": "maybe"}
    )


def test_every_problem_is_reported_at_once() -> None:
    text = "[pool]\ncallTimeout = 'x'\nidleTimeout = 'y'\n[servers.Bad]\ncommand = 'x'\n"
    with pytest.raises(ConfigError) as refused:
        parse_config(text)
    assert len(refused.value.problems) == 3


def test_passthrough_must_name_configured_servers_in_order() -> None:
    text = "[servers.demo]\ncommand = 'a'\n[servers.tasks]\ncommand = 'b'\n"
    config = parse_config(text, flags={"mcp.passthrough": "tasks,demo"})
    assert config.settings.names("mcp.passthrough") == ("tasks", "demo")
    assert "did you mean demo?" in _problems(text, environ={"MCPX_MCP_PASSTHROUGH": "dem"})


def test_misspelt_environment_variables_are_warned_about() -> None:
    config = parse_config(None, environ={"MCPX_POOL_CALLTIMEOUT": "3", "MCPX_SCHEMAS": "/x"})
    assert config.warnings == (
        "environment variable MCPX_POOL_CALLTIMEOUT is not a setting (did you mean MCPX_POOL_CALL_TIMEOUT?); "
        "it is ignored",
    )


# -- the table ----------------------------------------------------------------------


def test_env_names_are_mcpx_plus_upper_snake_except_three_short_ones() -> None:
    assert env_name("pool.callTimeout") == "MCPX_POOL_CALL_TIMEOUT"
    assert env_name("proto.stateTTL") == "MCPX_PROTO_STATE_TTL"
    exceptions = {s.key: s.env for s in SETTINGS if s.env != env_name(s.key)}
    assert exceptions == {
        "spec.first": "MCPX_MCP_SPEC",
        "state.dir": "MCPX_STATE",
        "daemon.endpoint": "MCPX_DAEMON",
    }
    assert len({s.env for s in SETTINGS}) == len(SETTINGS)


def test_the_table_holds_the_settings_mcpx_documents() -> None:
    keys = {s.key for s in SETTINGS}
    assert {
        "spec.precedence", "spec.first", "spec.lenient", "pool.idleTimeout", "pool.callTimeout",
        "pool.maxSpawnsPerMinute", "transport.address", "transport.port", "mcp.passthrough", "state.dir",
    } <= keys  # fmt: skip
    assert resolve_settings().duration("pool.callTimeout") == 120.0
    for definition in SETTINGS:  # every default is a value its own kind accepts back
        if definition.default is not None:
            shown = definition.kind.show(definition.default)
            if shown != "(none)":
                assert definition.kind.parse(shown) == definition.default, definition.key


def test_every_setting_is_documented_with_its_variable() -> None:
    doc = (ROOT / "spec" / "configuration.md").read_text()
    for definition in SETTINGS:
        assert f"`{definition.key}`" in doc, definition.key
        assert f"`{definition.env}`" in doc, definition.env


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90.0), (90, 90.0), (1.5, 1.5), ("90s", 90.0), ("2m", 120.0), ("1h30m", 5400.0), ("500ms", 0.5),
     ("1m0.5s", 60.5), ("0s", 0.0)],
)  # fmt: skip
def test_durations(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds
    assert parse_duration(format_duration(seconds)) == seconds


@pytest.mark.parametrize("text", ["", "-1", "2 m", "1x", "m", "inf", "nan", True, None, [1]])
def test_bad_durations(text: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


# -- files and the state directory ---------------------------------------------------


def test_load_config_reads_the_file_it_is_given(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(HOST_JSON)
    config = load_config(str(path), environ={**ENV, "HOME": str(tmp_path)})
    assert (config.path, config.found, config.format) == (str(path), True, "json")
    assert set(config.servers) == {"files", "github"}
    assert config.settings["pool.callTimeout"].source is Source.DEFAULT


def test_a_missing_default_file_means_defaults_but_an_asked_for_one_is_refused(tmp_path: Path) -> None:
    config = load_config(environ={"HOME": str(tmp_path)})
    # No file: the built-in default, mcpx's own demo server as "demo".
    assert not config.found and list(config.servers) == ["demo"]
    assert config.servers["demo"].argv()[1:] == ["-m", "mcpx", "demo"]
    empty = tmp_path / "empty.toml"
    empty.write_text("[pool]\ncallTimeout = '30s'\n")
    assert load_config(str(empty), environ={"HOME": str(tmp_path)}).servers == {}  # a file says what runs
    assert config.path == f"{tmp_path}/.config/mcpx/config.toml"
    with pytest.raises(ConfigError, match="MCPX_CONFIG"):
        load_config(environ={"HOME": str(tmp_path), "MCPX_CONFIG": str(tmp_path / "nope.toml")})
    with pytest.raises(ConfigError, match="pass another --config"):
        load_config(str(tmp_path / "nope.toml"), environ={"HOME": str(tmp_path)})


def test_a_file_with_secrets_readable_by_others_is_warned_about(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[servers.a]\nurl = 'https://h'\nauth = { type = 'bearer', token = 'literal' }\n")
    path.chmod(0o644)
    warnings = load_config(str(path), environ={"HOME": str(tmp_path)}).warnings
    assert any("chmod 600" in w for w in warnings)
    path.chmod(0o600)
    assert load_config(str(path), environ={"HOME": str(tmp_path)}).warnings == ()


def test_only_entries_that_look_like_secrets_make_a_readable_file_warned_about(tmp_path: Path) -> None:
    """``MEMORY_FILE_PATH`` or ``X-Client`` is no secret; ``GITHUB_TOKEN`` and ``Authorization`` are, and are named."""
    path = tmp_path / "config.toml"
    path.write_text(
        "[servers.memory]\ncommand = 'npx'\nenv = { MEMORY_FILE_PATH = '/tmp/memory.json', DEBUG = '1' }\n"
        "[servers.remote]\nurl = 'https://h'\nheaders = { X-Client = 'mcpx-tests' }\n"
    )
    path.chmod(0o644)
    assert load_config(str(path), environ={"HOME": str(tmp_path)}).warnings == ()
    path.write_text(
        "[servers.memory]\ncommand = 'npx'\nenv = { MEMORY_FILE_PATH = '/tmp/m.json', GITHUB_TOKEN = 'ghp_x' }\n"
        "[servers.remote]\nurl = 'https://h'\nheaders = { Authorization = 'Bearer x', X-Client = 'mcpx-tests' }\n"
    )
    (warning,) = load_config(str(path), environ={"HOME": str(tmp_path)}).warnings
    assert "memory env GITHUB_TOKEN" in warning and "remote header Authorization" in warning, warning
    assert "MEMORY_FILE_PATH" not in warning and "X-Client" not in warning and "chmod 600" in warning, warning


@pytest.fixture(params=[0o022, 0o000, 0o277])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_state_dir_is_created_owner_only_whatever_the_umask(tmp_path: Path, umask: int) -> None:
    target = tmp_path / "a" / "b" / "mcpx"
    assert ensure_state_dir(target) == target
    assert _mode(target) == 0o700
    assert _mode(tmp_path / "a") == 0o700  # missing parents too (XDG)
    path = write_state_file(target, "upstream-eras.json", b"{}")
    assert _mode(path) == 0o600 and path.read_bytes() == b"{}"
    write_state_file(target, "upstream-eras.json", b'{"v": 2}')  # replaced whole
    assert path.read_bytes() == b'{"v": 2}' and _mode(path) == 0o600
    assert [p.name for p in target.iterdir()] == ["upstream-eras.json"]  # no temporary left behind


def test_an_existing_state_dir_is_tightened(tmp_path: Path) -> None:
    target = tmp_path / "state"
    target.mkdir(mode=0o755)
    target.chmod(0o755)
    ensure_state_dir(target)
    assert _mode(target) == 0o700


def test_state_files_are_created_with_their_mode_from_the_first_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[tuple[int, int]] = []
    real_open = os.open

    def spy(path: Any, flags: int, mode: int = 0o777, **kwargs: Any) -> int:
        opened.append((flags, mode))
        return real_open(path, flags, mode, **kwargs)

    monkeypatch.setattr(os, "open", spy)
    write_state_file(tmp_path / "s", "f", b"x")
    ((flags, mode),) = opened
    assert mode == 0o600 and flags & os.O_CREAT and flags & os.O_EXCL


def test_state_paths_are_refused_when_unusable(tmp_path: Path) -> None:
    afile = tmp_path / "file"
    afile.write_text("")
    with pytest.raises(ConfigError, match="not a directory"):
        ensure_state_dir(afile)
    for name in ("", "..", "a/b"):
        with pytest.raises(ValueError):
            write_state_file(tmp_path / "s", name, b"")


# -- the command ------------------------------------------------------------------


def _mcpx(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MCPX_", "XDG_"))}
    return subprocess.run(
        [sys.executable, "-m", "mcpx", *args],
        check=False,
        capture_output=True,
        text=True,
        env={**clean, **env},
        cwd=ROOT,
        timeout=60,
    )


def test_mcpx_settings_shows_each_value_and_where_it_came_from(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        TOML + '\n[pool]\ncallTimeout = "90s"\nidleTimeout = "1m"\n[mcp]\npassthrough = ["files"]\n'
    )
    config.chmod(0o600)
    env = {"HOME": str(tmp_path), "MCPX_CONFIG": str(config), "MCPX_POOL_CALL_TIMEOUT": "75s", **ENV}
    done = _mcpx("settings", "--json", "--mcp-spec", "2025-06-18", "--set", "transport.port=9000", env=env)
    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout
    shown = json.loads(done.stdout)
    settings = shown["settings"]
    assert settings["pool.callTimeout"] == {
        "value": 75.0,
        "source": "env",
        "origin": "MCPX_POOL_CALL_TIMEOUT",
    }
    assert settings["pool.idleTimeout"] == {"value": 60.0, "source": "file", "origin": str(config)}
    assert settings["spec.first"] == {"value": "2025-06-18", "source": "flag", "origin": "--mcp-spec"}
    assert settings["transport.port"] == {"value": 9000, "source": "flag", "origin": "--set transport.port"}
    assert settings["proto.askRounds"] == {"value": 8, "source": "default", "origin": "default"}
    assert settings["state.dir"]["value"] == f"{tmp_path}/.local/state/mcpx"
    assert shown["policy"]["first"] == "2025-06-18"
    assert shown["servers"]["github"]["auth"] == {
        "type": "bearer",
        "headers": ["Authorization"],
        "query": [],
        "env": [],
        "secretFrom": ["env GITHUB_TOKEN"],
    }
    assert shown["config"] == {"path": str(config), "found": True, "format": "toml"}

    table = _mcpx("settings", env=env)
    assert table.returncode == 0, table.stderr
    assert SECRET not in table.stdout
    rows = {line.split()[0]: line.split()[1:] for line in table.stdout.splitlines() if line.strip()}
    assert rows["pool.callTimeout"] == ["1m15s", "env", "MCPX_POOL_CALL_TIMEOUT"]
    assert rows["pool.idleTimeout"] == ["1m", "file", str(config)]
    assert rows["proto.askRounds"] == ["8", "default"]
    assert re.search(
        r"github\s+http\s+https://api\.example\.com/mcp\s+\[headers X-Team; auth bearer", table.stdout
    )


def test_mcpx_settings_refuses_a_bad_configuration_with_every_reason(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "MCPX_TRANSPORT_PORT": "http", "MCPX_SPEC_LENIENT": "2025-13-01"}
    done = _mcpx("settings", "--passthrough", "ghost", env=env)
    assert done.returncode == 2
    assert "transport.port = 'http' (from MCPX_TRANSPORT_PORT)" in done.stderr
    assert "'2025-13-01' is not an MCP revision" in done.stderr
    missing = _mcpx("settings", "--config", str(tmp_path / "none.toml"), env={"HOME": str(tmp_path)})
    assert missing.returncode == 2 and "does not exist" in missing.stderr


def test_a_command_server_is_one_per_host_by_default_and_a_url_server_shared() -> None:
    config = parse_config(
        "[servers.a]\ncommand = 'npx'\n[servers.b]\nurl = 'https://example.com/mcp'\n", environ={}
    )
    assert config.servers["a"].scope is Scope.HOST and config.servers["b"].scope is Scope.SHARED
    pinned = parse_config("[servers.a]\ncommand = 'npx'\nscope = 'shared'\n", environ={})
    assert pinned.servers["a"].scope is Scope.SHARED


def test_a_servers_era_is_auto_unless_pinned_and_an_unknown_one_is_refused() -> None:
    assert parse_config("[servers.a]\ncommand = 'npx'\n", environ={}).servers["a"].era == "auto"
    pinned = parse_config("[servers.a]\ncommand = 'npx'\nera = 'legacy'\n", environ={}).servers["a"]
    assert pinned.era == "legacy" and pinned.describe()["era"] == "legacy"
    message = _problems("[servers.a]\ncommand = 'npx'\nera = 'old'\n")
    assert "servers.a.era 'old' is not an era; use auto, legacy, modern" in message, message
