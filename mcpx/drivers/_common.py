"""What every driver does the same way, kept out of the loops themselves."""

from __future__ import annotations

import sys
from typing import Any

from ..core import ServerSession, Trace
from ..server import Call, Context, Outcome

__all__ = ["apply_outcome", "call_kwargs", "trace_to_stderr"]


def apply_outcome(session: ServerSession, token: int, outcome: Outcome) -> None:
    """Answer request ``token`` with ``outcome``."""
    if outcome.error is not None:
        code, message, data = outcome.error
        session.respond_error(token, code, message, data)
    else:
        assert outcome.result is not None
        session.respond(token, outcome.result)


def call_kwargs(call: Call, context: Context) -> dict[str, Any]:
    """The keyword arguments for ``call.fn``, with the context where it asked for one."""
    if call.context_param is None:
        return call.kwargs
    kwargs = dict(call.kwargs)
    kwargs[call.context_param] = context
    return kwargs


def trace_to_stderr(action: Trace) -> None:
    """Write a trace event to stderr (stdout belongs to the protocol)."""
    detail = " ".join(f"{k}={v}" for k, v in action.detail.items())
    print(f"mcpx trace: {action.event} {detail}", file=sys.stderr, flush=True)
