"""The public surface is pinned: adding or removing a name is a deliberate change."""

from __future__ import annotations

import importlib

import pytest

SURFACE = {
    "mcpx.core": {
        "Action", "Ages", "AtOrAfter", "Before", "Between", "CancelRequest", "Close", "ConnectionState",
        "DEFAULT_MAX_LINE", "EndOfInput", "Era", "ErrorResponse", "HEADER_MISMATCH", "HandleRequest",
        "INTERNAL_ERROR", "INVALID_PARAMS", "INVALID_REQUEST", "InvalidMessage", "LEGACY_REVISIONS",
        "LOG_LEVELS", "Line", "LineReader", "LineTooLong", "LocalProtocolError", "METHOD_NOT_FOUND",
        "MISSING_REQUIRED_CLIENT_CAPABILITY", "MODERN_REVISIONS", "Message", "NEWEST", "Notification", "OLDEST",
        "Only", "PARSE_ERROR", "PeerReplied", "ProtocolError", "RESOURCE_NOT_FOUND", "REVISIONS",
        "RemoteProtocolError", "Request", "RequestContext", "RequestId", "Response", "Revision", "Send",
        "ServerConfig", "ServerSession", "SpecPolicy", "ToolHints", "StdioServerConnection", "Task", "TaskStore",
        "Trace",
        "UNSUPPORTED_PROTOCOL_VERSION", "URL_ELICITATION_REQUIRED", "decode", "downgrade", "downgrade_error",
        "encode", "envelope", "parse_message", "parse_revision", "CloseConnection", "HttpConfig", "HttpServer",
        "SendBytes", "SessionEnded", "Subscribed", "http_status_for", "EndStream", "SuspendStream", "Answered", "Question", "RoundTable", "SseDecoder", "SseEvent", "comment", "encode_event",
        "AbandonStream", "ClientAction", "ClientSession", "Completed", "Failed", "InputRequired", "Progress", "Ready", "ServerNotification", "ServerRequest", "ServerRequestCancelled", "Closed", "HttpClientAction", "HttpClientConfig", "HttpClientConnection", "JsonReceived", "OpenConnection", "RequestRefused", "SessionExpired", "StreamEnded", "CloseResponse", "EraCache", "EraEntry", "EraProbe", "HttpAnswered", "HttpBody", "HttpRequest", "LineReceived", "MessageReceived", "OpenSse", "ProbeAction", "ProbeConfig", "ProbeDone", "ProbeEvent", "ProbeFailed", "ProbeState", "Reconnect", "SendMessage", "TransportClosed", "EndpointReady", "SseClientAction", "SseClientConfig", "SseClientConnection", "AppRequest", "Answer", "GatewayError", "GatewaySurface", "McpxUriError", "OwnResource", "Page", "Route", "UpstreamCatalog", "gateway_tools", "mcpx_uri", "mcpx_uri_template", "parse_mcpx_uri", "rewrite_result_uris", "template_matches", "CallFailed", "CallTimedOut", "Granted", "InstanceState", "Pool", "PoolAction", "PoolConfig", "Refused", "ServerState", "ServerStatus", "Spawn", "Stop",
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
