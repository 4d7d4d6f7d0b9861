"""Putting an approval `Question` to the user through MCP elicitation, in both protocol eras.

Up to protocol 2025-11-25 the server asks in the middle of the call: an ``elicitation/create``
request over the connection (`ask_over_connection`), answered while the program waits.

From 2026-07-28 a server may not send requests: a tool call that needs the user's input returns an
``input_required`` result naming its questions, and the client calls again with the answers and
the echoed ``requestState`` (sealed and bound to the call by the SDK). A program cannot be rerun
from the start to get there (its earlier tool calls would happen twice), so `Rounds` keeps it
running in the background, paused at the question, and hands it the answer when the call comes
back; a run whose client does not come back is denied after `approval_timeout_s` and ends.

Both put the same form: the question as its message, and one checkbox, "allow this tool for the
rest of this session".
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
from mcp.server.elicitation import render_elicitation_schema
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp_types import (
    CallToolResult,
    ClientCapabilities,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    InputResponses,
)
from pydantic import BaseModel, Field, ValidationError, create_model

from attp_server.sessions.approvals import Answer, Ask, Question

logger = logging.getLogger(__name__)

KEY_PREFIX = "approval-"


def approval_form(question: Question) -> type[BaseModel]:
    """The elicitation form: one checkbox to allow the tool for the rest of the session."""
    return create_model(
        "Approval",
        allow_for_session=(
            bool,
            Field(
                False,
                title=f"Also allow {question.tool} for the rest of this session",
                description=f"Later calls to {question.tool} in this session run without asking again.",
            ),
        ),
    )


def can_elicit(capabilities: ClientCapabilities | None) -> bool:
    """Whether the client declared form elicitation (a bare ``elicitation: {}`` counts as form)."""
    elicitation = capabilities.elicitation if capabilities is not None else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


def answer_of(action: str, content: Any, form: type[BaseModel]) -> Answer:
    """An elicitation reply as an `Answer`; an accept whose content does not fit the form allows this call only."""
    if action == "accept":
        try:
            chosen = form.model_validate(content or {})
        except ValidationError:
            return Answer.ALLOW
        return Answer.ALLOW_FOR_SESSION if getattr(chosen, "allow_for_session", False) else Answer.ALLOW
    return Answer.DECLINE if action == "decline" else Answer.CANCEL


def ask_over_connection(ctx: Context) -> Ask:
    """Ask with an ``elicitation/create`` request in the middle of the call (protocols up to 2025-11-25)."""

    async def ask(question: Question) -> Answer:
        form = approval_form(question)
        schema = render_elicitation_schema(form)
        try:
            reply = await ctx.session.elicit_form(question.message(), schema, related_request_id=ctx.request_id)
        except NoBackChannelError:
            return Answer.UNAVAILABLE
        except MCPError as exc:  # the client refused the request: no yes was given
            logger.info("the client answered an approval request with an error: %s", exc)
            return Answer.CANCEL
        return answer_of(reply.action, reply.content, form)

    return ask


@dataclass(eq=False)
class _Pending:
    question: Question
    answered: anyio.Event = field(default_factory=anyio.Event)
    answer: Answer = Answer.CANCEL


@dataclass(eq=False)
class _Waiting:
    """A run that may wait for answers across calls: its questions, its result, and its cancel scope."""

    owner: str
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    pending: dict[str, _Pending] = field(default_factory=dict)
    asked: set[str] = field(default_factory=set)
    changed: anyio.Event = field(default_factory=anyio.Event)
    result: CallToolResult | None = None
    attached: bool = False
    count: int = 0

    async def ask(self, question: Question) -> Answer:
        self.count += 1
        key = f"{KEY_PREFIX}{self.count}"
        pending = self.pending[key] = _Pending(question)
        self.changed.set()
        try:
            await pending.answered.wait()
        finally:
            self.pending.pop(key, None)
        return pending.answer

    def finish(self, result: CallToolResult) -> None:
        self.result = result
        self.changed.set()


Execute = Callable[[Ask], Awaitable[CallToolResult]]
"""Runs the call with the given way of asking, and renders its result."""


class Rounds:
    """Runs that wait, between calls, for the answers of a client on protocol 2026-07-28."""

    def __init__(self, tasks: anyio.abc.TaskGroup, timeout_s: float, expired: Callable[[], CallToolResult]) -> None:
        self.tasks = tasks
        self.timeout_s = timeout_s
        self.expired = expired
        self._waiting: dict[str, _Waiting] = {}

    def __len__(self) -> int:
        return len(self._waiting)

    async def start(self, execute: Execute, owner: str) -> CallToolResult | InputRequiredResult:
        """Start the call in the background and answer with its result, or with its first questions."""
        waiting = _Waiting(owner)

        async def run() -> None:
            with waiting.scope:
                waiting.finish(await execute(waiting.ask))
            if not waiting.attached:  # nobody is waiting for the result any more: forget the run
                self._forget(waiting)

        self.tasks.start_soon(run)
        return await self._outcome(waiting)

    async def resume(
        self, state: str, responses: InputResponses | None, owner: str
    ) -> CallToolResult | InputRequiredResult:
        """Hand the client's answers to the run `state` names, and answer with what it does next."""
        waiting = self._waiting.pop(state, None)
        if waiting is None or waiting.owner != owner:
            return self.expired()
        for key, response in (responses or {}).items():
            if not isinstance(response, ElicitResult) or key not in waiting.pending:
                continue
            pending = waiting.pending.pop(key)
            pending.answer = answer_of(response.action, response.content, approval_form(pending.question))
            pending.answered.set()
        waiting.asked.clear()  # a question left unanswered is asked again
        return await self._outcome(waiting)

    async def _outcome(self, waiting: _Waiting) -> CallToolResult | InputRequiredResult:
        waiting.attached = True
        try:
            while waiting.result is None and not (set(waiting.pending) - waiting.asked):
                waiting.changed = anyio.Event()
                await waiting.changed.wait()
        except BaseException:
            waiting.scope.cancel()  # the client went away (or the server is stopping): the run ends too
            raise
        finally:
            waiting.attached = False
        if waiting.result is not None:
            return waiting.result
        token = secrets.token_urlsafe(24)
        self._waiting[token] = waiting
        self.tasks.start_soon(self._stop_unless_resumed, token)
        waiting.asked.update(waiting.pending)
        requests = {
            key: ElicitRequest(
                params=ElicitRequestFormParams(
                    message=pending.question.message(),
                    requested_schema=render_elicitation_schema(approval_form(pending.question)),
                )
            )
            for key, pending in waiting.pending.items()
        }
        return InputRequiredResult(input_requests=dict(requests), request_state=token)

    async def _stop_unless_resumed(self, token: str) -> None:
        """A client that does not come back within `timeout_s` gets no answer: its run is stopped."""
        await anyio.sleep(self.timeout_s)
        waiting = self._waiting.pop(token, None)
        if waiting is not None:
            waiting.scope.cancel()

    def _forget(self, waiting: _Waiting) -> None:
        for token, other in list(self._waiting.items()):
            if other is waiting:
                del self._waiting[token]
