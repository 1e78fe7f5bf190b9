"""Per-server upstream auth blocks: parsing, refusals, indirection, secrecy.

The blocks are described in spec/configuration.md, "Upstream auth".
"""

from __future__ import annotations

import base64
import dataclasses
from typing import Any

import pytest

from mcpx.core.upstream_auth import (
    AUTH_TYPES,
    AuthConfigError,
    UpstreamAuth,
    parse_auth,
    refused_header_reason,
)

SECRET = "s3cr3t-VALUE-42"
ENV = {"TOKEN": SECRET, "EMPTY": ""}


def _refusal(block: Any, **kwargs: Any) -> str:
    kwargs.setdefault("environ", ENV)
    with pytest.raises(AuthConfigError) as refused:
        parse_auth(block, **kwargs)
    message = str(refused.value)
    assert SECRET not in message
    return message


# -- the five types -------------------------------------------------------------


def test_bearer_from_a_literal_and_from_the_environment() -> None:
    literal = parse_auth({"type": "bearer", "token": SECRET}, environ={})
    indirect = parse_auth({"type": "bearer", "tokenEnv": "TOKEN"}, environ=ENV)
    assert literal.headers == indirect.headers == (("Authorization", f"Bearer {SECRET}"),)
    assert literal.query == literal.env == ()
    assert literal.secret_from == ("config",)
    assert indirect.secret_from == ("env TOKEN",)
    assert literal.transport == "http"


def test_basic_is_rfc7617_utf8() -> None:
    auth = parse_auth({"type": "basic", "username": "zoë", "passwordEnv": "TOKEN"}, environ=ENV)
    ((name, value),) = auth.headers
    assert name == "Authorization"
    scheme, encoded = value.split(" ")
    assert scheme == "Basic"
    assert base64.b64decode(encoded).decode() == f"zoë:{SECRET}"


def test_header_sets_any_header_the_transport_does_not_own() -> None:
    auth = parse_auth({"type": "header", "name": "X-Api-Key", "valueEnv": "TOKEN"}, environ=ENV)
    assert auth.headers == (("X-Api-Key", SECRET),)
    custom_authorization = parse_auth(
        {"type": "header", "name": "Authorization", "value": "Token abc"}, environ={}
    )
    assert custom_authorization.headers == (("Authorization", "Token abc"),)


def test_query_is_appended_percent_encoded_after_the_urls_own_query() -> None:
    auth = parse_auth({"type": "query", "name": "api key", "value": "a&b=c/d"}, environ={})
    assert auth.query == (("api key", "a&b=c/d"),)
    assert auth.apply_to_url("https://h.example/mcp") == "https://h.example/mcp?api%20key=a%26b%3Dc%2Fd"
    assert (
        auth.apply_to_url("http://h:8080/mcp?t=1#frag")
        == "http://h:8080/mcp?t=1&api%20key=a%26b%3Dc%2Fd#frag"
    )


def test_apply_to_url_refuses_what_is_not_an_http_url() -> None:
    auth = parse_auth({"type": "query", "name": "k", "value": SECRET}, environ={})
    for url in ("ftp://h/x", "http:///nohost", "http://h:99999/"):
        with pytest.raises(ValueError) as refused:
            auth.apply_to_url(url)
        assert SECRET not in str(refused.value)
    bearer = parse_auth({"type": "bearer", "token": "t"}, environ={})
    assert bearer.apply_to_url("http://h/mcp?x=1") == "http://h/mcp?x=1"


def test_env_takes_literals_and_copies_from_the_gateway_environment() -> None:
    auth = parse_auth({"type": "env", "vars": {"MODE": "ro"}, "varsEnv": {"API_TOKEN": "TOKEN"}}, environ=ENV)
    assert auth.env_vars() == {"MODE": "ro", "API_TOKEN": SECRET}
    assert auth.headers == auth.query == ()
    assert auth.transport == "stdio"
    assert auth.secret_from == ("config", "env TOKEN")


def test_the_auth_types_are_the_five_the_seed_names() -> None:
    assert AUTH_TYPES == ("bearer", "basic", "header", "query", "env")


# -- refusals ---------------------------------------------------------------------


def test_oauth_is_refused_saying_it_is_not_implemented_and_what_exists() -> None:
    message = _refusal({"type": "oauth", "clientId": "x"})
    assert "oauth is not implemented" in message
    for kind in AUTH_TYPES:
        assert kind in message


@pytest.mark.parametrize(
    ("block", "fragment"),
    [
        ({}, "needs a type"),
        ({"type": "digest"}, "use one of bearer, basic, header, query, env"),
        ({"type": "bearer"}, "needs token"),
        ({"type": "bearer", "token": SECRET, "tokenEnv": "TOKEN"}, "not both"),
        ({"type": "bearer", "tokenEnv": "NOPE"}, "NOPE, which is not set"),
        ({"type": "bearer", "tokenEnv": "EMPTY"}, "set but empty"),
        ({"type": "bearer", "tokenEnv": "1BAD"}, "must name an environment variable"),
        ({"type": "bearer", "token": f"{SECRET} x"}, "visible ASCII without spaces"),
        ({"type": "bearer", "token": SECRET, "scheme": "Token"}, "unknown key(s) scheme"),
        ({"type": "basic", "password": SECRET}, "needs username"),
        ({"type": "basic", "username": "a:b", "password": SECRET}, "must not contain ':'"),
        ({"type": "header", "value": SECRET}, "needs name"),
        ({"type": "header", "name": "X-Key", "value": f"{SECRET}\r\nX-Evil: 1"}, "visible ASCII"),
        ({"type": "header", "name": "X-Key", "value": f" {SECRET}"}, "no leading or trailing space"),
        ({"type": "header", "name": "Bad Name", "value": SECRET}, "not a valid HTTP header name"),
        ({"type": "query", "name": "", "value": SECRET}, "non-empty string"),
        ({"type": "env"}, "needs vars"),
        ({"type": "env", "vars": {"1X": "v"}}, "not an environment variable name"),
        ({"type": "env", "vars": {"X": 1}}, "table of variable name = string"),
        ({"type": "env", "vars": {"X": "a"}, "varsEnv": {"X": "TOKEN"}}, "both vars and varsEnv"),
        ("bearer", "must be a table"),
    ],
)
def test_refusals_say_what_to_change_and_never_show_the_secret(block: Any, fragment: str) -> None:
    assert fragment in _refusal(block)


@pytest.mark.parametrize(
    "name",
    [
        "Connection", "Keep-Alive", "Transfer-Encoding", "TE", "Trailer", "Upgrade", "Proxy-Authorization",
        "proxy-connection", "Host", "Content-Length", "MCP-Protocol-Version", "Mcp-Session-Id", "mcp-method",
        "Mcp-Name", "Mcp-Param-Region", "Last-Event-ID", "Accept", "Content-Type", "User-Agent", "Mcp-Anything",
    ],
)  # fmt: skip
def test_transport_and_protocol_headers_are_never_taken_from_configuration(name: str) -> None:
    assert refused_header_reason(name) is not None
    assert refused_header_reason(name.upper()) is not None
    message = _refusal({"type": "header", "name": name, "value": SECRET})
    assert name in message and "choose another header" in message


@pytest.mark.parametrize("name", ["Authorization", "X-Api-Key", "Cookie", "X-Mcp-Tenant", "Api-Key"])
def test_ordinary_headers_are_allowed(name: str) -> None:
    assert refused_header_reason(name) is None


@pytest.mark.parametrize("kind", ["bearer", "basic", "header", "query"])
def test_http_types_are_refused_for_a_spawned_server(kind: str) -> None:
    block = {"type": kind, "token": SECRET} if kind == "bearer" else {"type": kind}
    message = _refusal(block, transport="stdio")
    assert "type env" in message


def test_env_is_refused_for_an_http_server() -> None:
    message = _refusal({"type": "env", "vars": {"X": SECRET}}, transport="http")
    assert "bearer, basic, header or query" in message


def test_where_prefixes_every_message() -> None:
    message = _refusal({"type": "bearer", "tokenEnv": "NOPE"}, where="servers.github.auth")
    assert message.startswith("servers.github.auth.tokenEnv names NOPE")
    assert "servers.github.auth.token" in message  # the alternative


# -- secrecy and value semantics -------------------------------------------------


@pytest.mark.parametrize(
    "block",
    [
        {"type": "bearer", "token": SECRET},
        {"type": "basic", "username": "ada", "password": SECRET},
        {"type": "header", "name": "X-Key", "valueEnv": "TOKEN"},
        {"type": "query", "name": "key", "value": SECRET},
        {"type": "env", "vars": {"KEY": SECRET}},
    ],
)
def test_repr_str_and_describe_name_things_but_hide_secrets(block: dict[str, Any]) -> None:
    auth = parse_auth(block, environ=ENV)
    encoded = base64.b64encode(f"ada:{SECRET}".encode()).decode()
    for shown in (repr(auth), str(auth), repr(auth.describe()), repr([auth])):
        assert SECRET not in shown and encoded not in shown
        assert block["type"] in shown
    described = auth.describe()
    assert described["type"] == block["type"]
    assert described["headers"] + described["query"] + described["env"]  # names are shown


def test_auth_is_frozen_and_compares_by_value() -> None:
    one = parse_auth({"type": "bearer", "tokenEnv": "TOKEN"}, environ=ENV)
    two = parse_auth({"type": "bearer", "tokenEnv": "TOKEN"}, environ=ENV)
    assert one == two and hash(one) == hash(two)
    with pytest.raises(dataclasses.FrozenInstanceError):
        one.type = "basic"  # type: ignore[misc]
    assert isinstance(one, UpstreamAuth)


def test_the_environment_is_read_once_when_parsing() -> None:
    environ = dict(ENV)
    auth = parse_auth({"type": "bearer", "tokenEnv": "TOKEN"}, environ=environ)
    environ["TOKEN"] = "changed"
    assert auth.headers == (("Authorization", f"Bearer {SECRET}"),)


def test_a_value_built_by_hand_is_validated_too() -> None:
    with pytest.raises(AuthConfigError, match="MCP protocol header"):
        UpstreamAuth(type="header", headers=(("Mcp-Session-Id", "x"),))
    with pytest.raises(AuthConfigError, match="not one of"):
        UpstreamAuth(type="oauth")
    with pytest.raises(AuthConfigError, match="not both"):
        UpstreamAuth(type="bearer", headers=(("Authorization", "Bearer t"),), env=(("A", "b"),))
