"""The public surface is pinned: adding or removing a name is a deliberate change."""

from __future__ import annotations

import importlib

import pytest

SURFACE = {
    "mcpx.core": {
        "AbandonStream", "AbandonUpstream", "Action", "AnswerHost", "Answered", "AppRequest", "AskHost",
        "CallFailed", "CallTimedOut", "CancelRequest", "ClientAction", "ClientSession", "Close",
        "CloseConnection", "CloseResponse", "Closed", "Completed", "EndStream", "EndpointReady", "EraProbe",
        "Failed", "GatewaySurface", "Granted", "HEADER_MISMATCH", "HandleRequest", "HttpAnswered",
        "HttpBody", "HttpClientAction", "HttpClientConfig", "HttpClientConnection", "HttpConfig",
        "HttpRequest", "HttpServer", "INTERNAL_ERROR", "INVALID_PARAMS", "INVALID_REQUEST", "InputRequired",
        "JsonReceived", "LineReceived", "LocalProtocolError", "METHOD_NOT_FOUND",
        "MISSING_REQUIRED_CLIENT_CAPABILITY", "MessageReceived", "NotifyHost", "OpenConnection", "OpenSse",
        "PARSE_ERROR", "PeerReplied", "Pool", "PoolAction", "PoolConfig", "ProbeAction", "ProbeConfig",
        "ProbeDone", "ProbeEvent", "ProbeFailed", "Progress", "ProtocolError", "RESOURCE_NOT_FOUND",
        "Ready", "Reconnect", "Refused", "RemoteProtocolError", "RequestContext", "RequestRefused",
        "Revision", "RoundTable", "Router", "RouterAction", "Send", "SendBytes", "SendMessage",
        "SendUpstream", "ServerConfig", "ServerNotification", "ServerRequest", "ServerRequestCancelled",
        "ServerSession", "SessionEnded", "SessionExpired", "Spawn", "SseClientAction", "SseClientConfig",
        "SseClientConnection", "StdioServerConnection", "Stop", "StreamEnded", "Subscribed",
        "SuspendStream", "TaskStore", "ToolHints", "Trace", "TransportClosed",
        "UNSUPPORTED_PROTOCOL_VERSION", "URL_ELICITATION_REQUIRED", "UpstreamNotification",
        "UpstreamOutcome", "WithdrawAsk",
    },
    "mcpx.server": {
        "Call", "Context", "Deferred", "Invocation", "McpError", "Outcome", "Pending", "QuestionFailed", "QuestionRefused", "RequestCancelled", "RequestSink", "Server", "ToolError", "ToolResult", "audio",
        "embedded", "image", "resource_link", "text", "to_call_result",
    },
    "mcpx.drivers": {"LOOPS", "HttpConfig", "serve_http", "serve_stdio"},
    "mcpx.config": {
        "AUTH_TYPES", "SETTINGS", "AuthConfigError", "Config", "ConfigError", "Scope", "Setting", "SettingDef",
        "Settings", "Source", "UpstreamAuth", "UpstreamServer", "check_server_name", "config_location",
        "default_state_dir", "detect_format", "ensure_state_dir", "env_name", "format_duration", "load_config",
        "parse_auth", "parse_config", "parse_duration", "resolve_settings", "write_state_file",
    },
}  # fmt: skip


@pytest.mark.parametrize("module_name", sorted(SURFACE))
def test_public_surface_is_pinned(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert set(module.__all__) == SURFACE[module_name]
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert missing == [], f"{module_name}.__all__ names what it does not define: {missing}"
