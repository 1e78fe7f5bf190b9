"""Questions a call puts to its client, in both eras (spec/messages.md §5; rounds.py for the rules).

A legacy client (2025-06-18 client/elicitation, client/sampling,
client/roots) is sent server requests on the call's stream and answers them;
each question gets ``question_ttl`` seconds, then is withdrawn and the call
cancelled.  A 2026-07-28 client is answered ``input_required`` and the call
is parked in the ``RoundTable`` until the retry that brings the answers
(``inputResponses``, ``requestState``).  A client that did not declare the
capability, or whose revision lacks the request, is never asked: the call
gets a refusal it can report.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .actions import Answered, CancelRequest
from .errors import INTERNAL_ERROR, INVALID_PARAMS, LocalProtocolError
from .jsonrpc import ErrorResponse, Notification, Request, Response
from .revisions import META_RELATED_TASK, Revision
from .rounds import MRTR_METHODS, Question, StateError, question_refusal, required_capability
from .server_base import _CLOSED, _READY, _Ask, _InFlight
from .server_output import _Output


def _answers_shape(value: Any) -> bool:
    """``inputResponses``: an object whose every value is an answer object."""
    return isinstance(value, dict) and all(isinstance(v, dict) for v in value.values())


class _Questions(_Output):
    """The questions layer: ``ask``, its answers, time-outs and withdrawals, and 2026-07-28 rounds."""

    if TYPE_CHECKING:  # defined by a later layer

        def _ask_in_task(self, rec: _InFlight, ask_id: int, questions: list[Question]) -> None: ...
        def _task_gate(self, rec: _InFlight, params: Mapping[str, Any]) -> bool: ...

    def ask(self, token: int, questions: list[Question]) -> int:
        """Put ``questions`` to the client of call ``token``; returns the ask id.

        The answer comes as an ``Answered`` action with that id: the client's
        answers, or a refusal when this client may not be asked (it did not
        declare the capability, its revision lacks the request, the request
        came outside a session).  A legacy client is sent server requests on
        the call's stream; a 2026-07-28 request is answered ``input_required``
        and the call waits, parked, for the retry that brings the answers.
        """
        rec = self._inflight.get(token)
        if rec is None:
            raise LocalProtocolError(f"no request with token {token} is in flight")
        if not questions:
            raise LocalProtocolError("ask at least one question")
        keys = [q.key for q in questions]
        if len(set(keys)) != len(keys):
            raise LocalProtocolError(f"question keys must be unique: {keys}")
        ask_id = next(self._ask_ids)
        refusal = self._refusal(rec, questions)
        if refusal is not None:
            reason, required = refusal
            self._trace("question-refused", request_id=rec.id, reason=reason)
            self._actions.append(Answered(token=token, ask_id=ask_id, refused=reason, required=required))
            return ask_id
        if rec.modern and rec.task is not None:
            self._ask_in_task(rec, ask_id, questions)
        elif rec.modern:
            self._ask_modern(rec, ask_id, questions)
        else:
            self._ask_legacy(rec, ask_id, questions)
        return ask_id

    def _refusal(
        self, rec: _InFlight, questions: list[Question]
    ) -> tuple[str, Mapping[str, Any] | None] | None:
        if rec.modern:
            if rec.method not in MRTR_METHODS:
                return (
                    f"2026-07-28 lets only tools/call, prompts/get and resources/read ask; not {rec.method}",
                    None,
                )
            if self._rounds is None and rec.task is None:
                return ("this server keeps no state for questions; it cannot ask a 2026-07-28 client", None)
        else:
            if not self._can_push:
                return ("the request came outside any session, so the client cannot be asked anything", None)
            if self._state is not _READY or self._negotiated is None:
                return ("the client never finished initialize, so it cannot be asked anything", None)
        for question in questions:
            reason = question_refusal(question, rec.revision, rec.capabilities)
            if reason is not None:
                return (reason, required_capability(question))
        return None

    def _ask_legacy(self, rec: _InFlight, ask_id: int, questions: list[Question]) -> None:
        ask = _Ask(
            token=rec.token,
            ask_id=ask_id,
            pending={},
            answers={},
            deadline=self._now + self.config.question_ttl,
        )
        self._asks[ask_id] = ask
        stream = None
        if rec.task is not None and self._tasks is not None:
            self._tasks.ask(rec.task, ask_id, questions, self._now)
            waiters = self._result_waiters.get(rec.task.task_id)
            if waiters:
                stream = waiters[0].stream
            elif self._defer_task_questions:
                ask.deferred = list(questions)
                return
        self._send_questions(rec, ask, questions, stream)

    def _send_questions(
        self, rec: _InFlight, ask: _Ask, questions: list[Question], stream: int | None
    ) -> None:
        for question in questions:
            params = self._question_params(question, rec.revision)
            if rec.task is not None:  # 2025-11-25: every message tied to a task says so
                meta = dict(params.get("_meta") or {})
                meta[META_RELATED_TASK] = {"taskId": rec.task.task_id}
                params["_meta"] = meta
            request_id = self.send_request(question.method, params, related=rec.token, stream=stream)
            ask.pending[request_id] = question
            self._question_ids[request_id] = ask.ask_id

    @staticmethod
    def _question_params(question: Question, rev: Revision) -> dict[str, Any]:
        params = dict(question.params)
        if question.method == "elicitation/create" and rev < Revision.V2025_11_25:
            params.pop("mode", None)  # 2025-06-18 knows only forms, and no mode field
        return params

    def _answer(self, ask_id: int, request_id: int, answer: Mapping[str, Any]) -> None:
        ask = self._asks.get(ask_id)
        if ask is None:
            return
        question = ask.pending.pop(request_id, None)
        if question is None:
            return
        ask.answers[question.key] = answer
        if not ask.pending and not ask.deferred:
            self._finish_ask(ask)

    def _finish_ask(self, ask: _Ask) -> None:
        """Every question of ``ask`` has its answer: the call resumes (its task is working again)."""
        del self._asks[ask.ask_id]
        rec = self._inflight.get(ask.token)
        if rec is not None and rec.task is not None and self._tasks is not None:
            self._tasks.resume(rec.task, self._now)
        self._actions.append(Answered(token=ask.token, ask_id=ask.ask_id, answers=ask.answers))

    def _ask_timed_out(self, ask: _Ask) -> None:
        """The question's own deadline passed: the client is told, the call gets *cancel*."""
        for question in ask.deferred:  # never sent: no tasks/result came to carry it
            ask.answers[question.key] = self._unanswered(question)
        ask.deferred = []
        for request_id, question in list(ask.pending.items()):
            self._withdraw(request_id, "no answer within the question's deadline")
            self._answer(ask.ask_id, request_id, self._unanswered(question))
        if ask.ask_id in self._asks and not ask.pending:
            self._finish_ask(ask)  # only deferred questions were left: _answer never finished it

    @staticmethod
    def _unanswered(question: Question) -> Mapping[str, Any]:
        if question.method == "elicitation/create":
            return {"result": {"action": "cancel"}}  # not answered is not declined
        return {"error": {"code": -32001, "message": "the client did not answer in time"}}

    def _withdraw(self, request_id: int, reason: str) -> None:
        self._question_ids.pop(request_id, None)
        if self._outgoing.pop(request_id, None) is not None and self._state is not _CLOSED:
            self._emit(
                Notification(
                    method="notifications/cancelled", params={"requestId": request_id, "reason": reason}
                ).to_obj(),
                None,
                False,
            )

    def _drop_asks(self, token: int, *, withdraw: bool = False) -> None:
        for ask in [a for a in self._asks.values() if a.token == token]:
            del self._asks[ask.ask_id]
            for request_id in list(ask.pending):
                if withdraw:
                    self._withdraw(request_id, "the request that asked was cancelled")
                else:
                    # The call ended first: a late answer is dropped quietly,
                    # never handed to the application as a reply of its own.
                    self._question_ids.pop(request_id, None)
                    self._outgoing.pop(request_id, None)

    def _ask_modern(self, rec: _InFlight, ask_id: int, questions: list[Question]) -> None:
        answers = {q.key: {"result": rec.held.pop(q.key)} for q in questions if q.key in rec.held}
        remaining = [q for q in questions if q.key not in answers]
        if not remaining:
            self._actions.append(Answered(token=rec.token, ask_id=ask_id, answers=answers))
            return
        self._park(rec, ask_id, remaining, answers)

    def _park(
        self,
        rec: _InFlight,
        ask_id: int,
        questions: list[Question],
        answered: Mapping[str, Mapping[str, Any]],
    ) -> None:
        """Answer the current request ``input_required``; the call waits for the retry."""
        assert self._rounds is not None
        self._promotions.pop(rec.token, None)  # the retry decides afresh
        try:
            parked = self._rounds.park(
                token=rec.token,
                method=rec.method,
                params=rec.params,
                ask_id=ask_id,
                questions=questions,
                round=rec.round + 1,
                now=self._now,
            )
        except StateError as exc:
            self._cancelled_tokens.add(rec.token)
            self._actions.append(CancelRequest(token=rec.token, reason=exc.message))
            rec_token = rec.token
            self._reply(
                rec,
                ErrorResponse(id=rec.id, code=INTERNAL_ERROR, message=exc.message).to_obj(),
                INTERNAL_ERROR,
            )
            self._forget_token(rec_token)
            return
        parked.answered = dict(answered)
        parked.held = rec.held  # what the first request sent ahead stays for later questions
        result = {
            "resultType": "input_required",
            "inputRequests": {q.key: q.as_input_request() for q in questions},
            "requestState": parked.state,
        }
        self._trace("input-required", request_id=rec.id, round=parked.round, keys=sorted(parked.questions))
        self._forget(rec)
        self._reply(rec, Response(id=rec.id, result=self._shape_result(rec, result)).to_obj())

    def _forget_token(self, token: int) -> None:
        rec = self._inflight.get(token)
        if rec is not None:
            self._forget(rec)

    def _resume(self, rec: _InFlight, req: Request, params: Mapping[str, Any]) -> None:
        """A 2026-07-28 retry: take over the parked call its ``requestState`` names."""
        assert self._rounds is not None
        responses = params.get("inputResponses", {})
        if not _answers_shape(responses):
            self._error_in(
                rec.batch,
                req.id,
                INVALID_PARAMS,
                "Invalid params: inputResponses must be an object whose values are the answers' objects",
                None,
                rec.revision,
                rec.stream,
            )
            return
        try:
            parked = self._rounds.resume(
                params.get("requestState"), method=req.method, params=params, now=self._now
            )
        except StateError as exc:
            self._trace("state-refused", request_id=req.id, kind=exc.kind)
            self._error_in(
                rec.batch,
                req.id,
                INVALID_PARAMS,
                f"Invalid params: {exc.message}",
                None,
                rec.revision,
                rec.stream,
            )
            return
        # The retry answers under the call's token: the handler still runs as it.
        if req.method == "tools/call" and not self._task_gate(rec, params):
            self._rounds.forget(parked.token)
            self._cancelled_tokens.add(parked.token)
            self._actions.append(CancelRequest(token=parked.token, reason="the retry was refused"))
            return
        rec.token = parked.token
        rec.round = parked.round
        rec.held = parked.held
        self._cancelled_tokens.discard(parked.token)
        if rec.task_support is not None:
            self._promotions[rec.token] = self._now + self.config.task_after
        self._inflight[rec.token] = rec
        self._by_peer_id[req.id] = rec.token
        answers = dict(parked.answered)
        for key in parked.questions:
            if key in responses:
                answers[key] = {"result": responses[key]}  # keys nobody asked are ignored (SEP-2322)
        missing = [q for k, q in parked.questions.items() if k not in answers]
        if missing:
            self._park(rec, parked.ask_id, missing, answers)  # ask again for what is still missing
            return
        self._trace("resumed", request_id=req.id, round=parked.round)
        self._actions.append(Answered(token=rec.token, ask_id=parked.ask_id, answers=answers))
