"""Putting an approval `Question` to the user through MCP elicitation, in both protocol eras.

Up to protocol 2025-11-25 the server asks in the middle of the call: an ``elicitation/create``
request over the connection (`ask_over_connection`), answered while the program waits.

From 2026-07-28 a server may not send requests: a tool call that needs the user's input returns an
``input_required`` result naming its questions, and the client calls again with the answers and
the echoed ``requestState`` (sealed and bound to the call by the SDK). A program cannot be rerun
from the start to get there (its earlier tool calls would happen twice), so `Rounds` keeps it
running in the background, paused at the question, and hands it the answer when the call comes
back; a run whose client does not come back is denied after `approval_timeout_s` and ends.

The answers may come back to another replica than the one running the program (replicas behind a
round-robin proxy): the SDK seals ``requestState`` with a key every replica derives from
`secret_file`, and with a store, `Rounds` relays through it (`attp_server.store.rounds`): the replica
that gets the answers writes them into the round's row and waits for what came of them; the one
running the program, which polls while it has rounds waiting, hands them over and writes the outcome.

Both put the same form: the question as its message, and one checkbox, "allow this tool for the
rest of this session".
"""

from __future__ import annotations

import json
import logging
import secrets
import time
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
from attp_server.store import StoreError
from attp_server.store.rounds import RoundStore

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


def can_open_urls(capabilities: ClientCapabilities | None) -> bool:
    """Whether the client declared URL-mode elicitation (it shows a link to its user, who opens it)."""
    elicitation = capabilities.elicitation if capabilities is not None else None
    return elicitation is not None and elicitation.url is not None


def open_url_over_connection(ctx: Context) -> Callable[[str, str], Awaitable[bool]]:
    """Ask the user to open a link with an ``elicitation/create`` request in URL mode, in the middle of the call
    (protocols up to 2025-11-25): True once they agreed to open it."""

    async def open_url(message: str, url: str) -> bool:
        try:
            reply = await ctx.session.elicit_url(
                message, url, secrets.token_urlsafe(16), related_request_id=ctx.request_id
            )
        except NoBackChannelError:
            return False
        except MCPError as exc:
            logger.info("the client answered a request to open a link with an error: %s", exc)
            return False
        return bool(reply.action == "accept")

    return open_url


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


@dataclass(frozen=True)
class Relay:
    """Rounds answered through another replica: the store's rounds table, and this process among the replicas."""

    rounds: RoundStore
    instance: str
    poll_s: float = 0.1


class Rounds:
    """Runs that wait, between calls, for the answers of a client on protocol 2026-07-28."""

    def __init__(
        self,
        tasks: anyio.abc.TaskGroup,
        timeout_s: float,
        expired: Callable[[], CallToolResult],
        relay: Relay | None = None,
    ) -> None:
        self.tasks = tasks
        self.timeout_s = timeout_s
        self.expired = expired
        self.relay = relay
        self._waiting: dict[str, _Waiting] = {}
        self._polling = False

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
        if waiting is None:
            if self.relay is not None:
                return await self._relayed(state, responses, owner)
            return self.expired()
        if waiting.owner != owner:
            return self.expired()
        if self.relay is not None:
            await self._quietly(self.relay.rounds.close(state))
        return await self._answer(waiting, responses)

    async def _answer(
        self, waiting: _Waiting, responses: InputResponses | None
    ) -> CallToolResult | InputRequiredResult:
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
        if self.relay is not None:
            await self._quietly(self.relay.rounds.open(token, waiting.owner, self.relay.instance, now=time.time()))
            if not self._polling:
                self._polling = True
                self.tasks.start_soon(self._poll, self.relay)
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
            if self.relay is not None:
                await self._quietly(self.relay.rounds.close(token))

    def _forget(self, waiting: _Waiting) -> None:
        for token, other in list(self._waiting.items()):
            if other is waiting:
                del self._waiting[token]

    # ---------------------------------------------------------------- across replicas

    async def _relayed(
        self, token: str, responses: InputResponses | None, owner: str
    ) -> CallToolResult | InputRequiredResult:
        """Another replica runs this round: give it the answers through the store, and wait for what came of them."""
        assert self.relay is not None
        rounds = self.relay.rounds
        answers = {
            key: {"action": response.action, "content": response.content}
            for key, response in (responses or {}).items()
            if isinstance(response, ElicitResult)
        }
        try:
            if not await rounds.answer(token, owner, json.dumps(answers)):
                return self.expired()
            with anyio.move_on_after(self.timeout_s + 60):
                delay = 0.02
                while True:
                    there, outcome = await rounds.outcome(token)
                    if outcome is not None:
                        await rounds.close(token)
                        return _decode_outcome(outcome, self.expired)
                    if not there:
                        break
                    await anyio.sleep(delay)
                    delay = min(delay * 2, 0.2)
        except StoreError as exc:
            logger.warning("could not relay an approval's answers through the store: %s", exc)
        return self.expired()

    async def _poll(self, relay: Relay) -> None:
        """While rounds wait here, look for answers another replica received for them."""
        try:
            while self._waiting:
                await anyio.sleep(relay.poll_s)
                try:
                    found = await relay.rounds.answered(relay.instance)
                except StoreError as exc:
                    logger.warning("could not look for relayed approval answers: %s", exc)
                    continue
                for item in found:
                    waiting = self._waiting.pop(item.token, None)
                    if waiting is None:
                        await self._quietly(relay.rounds.settle(item.token, _encode_outcome(self.expired())))
                    else:
                        self.tasks.start_soon(self._settle, relay, item.token, waiting, item.answers)
        finally:
            self._polling = False

    async def _settle(self, relay: Relay, token: str, waiting: _Waiting, answers: str) -> None:
        responses: InputResponses = {}
        try:
            raw = json.loads(answers)
            for key, value in raw.items():
                responses[key] = ElicitResult(action=value["action"], content=value.get("content"))
        except (ValueError, TypeError, KeyError, ValidationError):
            logger.warning("relayed approval answers could not be read; they count as no answer")
        outcome = await self._answer(waiting, responses)
        await self._quietly(relay.rounds.settle(token, _encode_outcome(outcome)))

    @staticmethod
    async def _quietly(step: Awaitable[None]) -> None:
        try:
            await step
        except StoreError as exc:
            logger.warning("the store failed while relaying an approval round: %s", exc)


def _encode_outcome(outcome: CallToolResult | InputRequiredResult) -> str:
    kind = "input" if isinstance(outcome, InputRequiredResult) else "result"
    return json.dumps({"kind": kind, "data": outcome.model_dump(mode="json", by_alias=True, exclude_none=True)})


def _decode_outcome(text: str, expired: Callable[[], CallToolResult]) -> CallToolResult | InputRequiredResult:
    try:
        data = json.loads(text)
        if data["kind"] == "input":
            return InputRequiredResult.model_validate(data["data"])
        return CallToolResult.model_validate(data["data"])
    except (ValueError, KeyError, TypeError, ValidationError):
        logger.warning("a relayed approval outcome could not be read")
        return expired()
