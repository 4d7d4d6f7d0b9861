"""Approvals: the user says yes before a destructive tool call runs (``approval = never | destructive | always``).

`Approvals.check` stands between a validated tool call and the tool. When the setting asks for it
(``destructive``: a tool whose `ToolMarks` say destructive, e.g. write_file, bash, memory edits;
``always``: every tool), it puts a `Question` to the user through the `Ask` function the MCP face
gives the call (elicitation; `attp_server.faces.elicitation`), and waits for the answer, at most
`approval_timeout_s`, with the run's clock stopped (`attp_server.sandbox.process.pool.RunClock`): the
person's time is not the program's, nor a run slot's (the run gives its slot back while it waits; a principal
with as many runs waiting as it may is not asked: ``SERVER_BUSY``, `attp_server.run.admission`).
Accepted, the call runs; declined, dismissed or unanswered,
it fails with ``APPROVAL_DENIED`` and nothing is done; a client that cannot ask its user gets
``APPROVAL_UNAVAILABLE``, unless ``approval_fallback = "allow"``. "Allow this tool for the rest of
the session" is remembered on the `Session` by pack and tool (and in the store with it when the call
ends): allowing the files pack's ``write_file`` allows no upstream server's ``write_file``, and the
question names the pack (``hostile.write_file(...)``) so the user knows who is asking.

Nothing here knows MCP: the face turns a `Question` into an elicitation and the reply into an `Answer`.
"""

from __future__ import annotations

import contextlib
import enum
import reprlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio

from attp_server.errors import ErrorCode, ErrorInfo
from attp_server.sandbox.process.pool import PauseRefused, run_clock
from attp_server.sessions.registry import Session
from attp_server.settings import Settings
from attp_server.toolpack import Tool

MAX_ARGUMENTS_TEXT = 600
"""Longest rendering of a call's arguments in a question."""

_PREVIEW = reprlib.Repr()
_PREVIEW.maxstring = 120
_PREVIEW.maxother = 80
_PREVIEW.maxlist = _PREVIEW.maxdict = _PREVIEW.maxtuple = _PREVIEW.maxset = 6
_PREVIEW.maxlevel = 3


class Answer(enum.Enum):
    """The user's reply to a `Question`."""

    ALLOW = "allow"
    ALLOW_FOR_SESSION = "allow for the rest of the session"
    DECLINE = "decline"
    CANCEL = "cancel"
    UNAVAILABLE = "the client cannot ask its user"


@dataclass(frozen=True)
class Question:
    """One tool call waiting for the user's yes."""

    tool: str
    """``pack.tool``: the pack (an upstream MCP server's name, or a built-in pack's) says who is asking."""
    arguments: str
    """The arguments, shortened: what the user reads."""
    destructive: bool

    @property
    def call(self) -> str:
        return f"{self.tool}({self.arguments})"

    def message(self) -> str:
        what = "changes things (it is marked destructive)" if self.destructive else "needs your approval"
        return (
            f"The program the assistant sent to attp_execute wants to call {self.call}, which {what}. Allow this call?"
        )


Ask = Callable[[Question], Awaitable[Answer]]
"""Asks the user; given to a call by the face that can reach the user (None: nobody can be asked)."""

Decided = Callable[[str], Awaitable[None]]
"""Told the decision on a call that needed approval (the audit log)."""


def preview(arguments: Mapping[str, Any]) -> str:
    """``path='notes.md', content='# Title\\n...'``: every argument, each and all of them cut short."""
    text = ", ".join(f"{name}={_PREVIEW.repr(value)}" for name, value in arguments.items())
    return text if len(text) <= MAX_ARGUMENTS_TEXT else text[: MAX_ARGUMENTS_TEXT - 3] + "..."


class Approvals:
    """The `approval` settings, applied to one tool call at a time."""

    def __init__(self, settings: Settings) -> None:
        self.mode = settings.approval
        self.fallback = settings.approval_fallback
        self.timeout_s = settings.approval_timeout_s

    def needed(self, tool: Tool, session: Session | None, mode: str | None = None) -> bool:
        """Whether a call of `tool` waits for the user's approval (`mode`: the caller's own, under access rules)."""
        mode = mode or self.mode
        if mode == "never" or (session is not None and (tool.pack, tool.name) in session.approved):
            return False
        return mode == "always" or tool.marks.destructive

    async def check(
        self,
        tool: Tool,
        arguments: Mapping[str, Any],
        session: Session | None,
        ask: Ask | None,
        *,
        decided: Decided | None = None,
        mode: str | None = None,
    ) -> ErrorInfo | None:
        """None when the call may run; else the error that refuses it (nothing has been done).

        `decided` hears the decision on a call that needed approval (for the audit log): ``granted``,
        ``granted_for_session``, ``allowed_by_fallback``, or the error code that refuses it."""
        if not self.needed(tool, session, mode):
            return None
        refused, outcome = await self._decide(tool, arguments, session, ask)
        if decided is not None:
            await decided(refused.code if refused is not None else outcome)
        return refused

    async def _decide(
        self, tool: Tool, arguments: Mapping[str, Any], session: Session | None, ask: Ask | None
    ) -> tuple[ErrorInfo | None, str]:
        """The refusal (None: the call may run) and the decision's name."""
        question = Question(f"{tool.pack}.{tool.name}", preview(arguments), tool.marks.destructive)
        answer = Answer.UNAVAILABLE
        if ask is not None:
            clock = run_clock()
            try:
                # The run holds no slot while it waits (`RunClock.paused`), and takes one back after, un-timed.
                async with clock.paused() if clock is not None else contextlib.nullcontext():
                    with anyio.move_on_after(self.timeout_s) as waited:
                        answer = await ask(question)
            except PauseRefused as refused:
                return self._busy(question, tool.ref, str(refused)), ""
            if waited.cancelled_caught:
                why = f"nobody answered within approval_timeout_s = {self.timeout_s:g} s"
                return self._denied(question, tool.ref, why), ""
        if answer is Answer.ALLOW_FOR_SESSION and session is not None:
            session.allow((tool.pack, tool.name))
            return None, "granted_for_session"
        if answer in (Answer.ALLOW, Answer.ALLOW_FOR_SESSION):
            return None, "granted"
        if answer is Answer.UNAVAILABLE:
            return (
                (None, "allowed_by_fallback")
                if self.fallback == "allow"
                else (self._unavailable(question, tool.ref), "")
            )
        why = "the user declined it" if answer is Answer.DECLINE else "the user dismissed it"
        return self._denied(question, tool.ref, why), ""

    def _denied(self, question: Question, ref: str, why: str) -> ErrorInfo:
        return ErrorInfo(
            code=ErrorCode.APPROVAL_DENIED,
            message=f"{question.tool}() was not run: it needs the user's approval and {why}. Nothing was done.",
            tool_name=ref,
            solution="Do not send the same call again unasked: tell the user what you wanted to do and why, "
            "or carry on without it.",
        )

    def _busy(self, question: Question, ref: str, why: str) -> ErrorInfo:
        return ErrorInfo(
            code=ErrorCode.SERVER_BUSY,
            message=f"{question.tool}() was not run: it needs the user's approval, and {why}. Nothing was done.",
            tool_name=ref,
            solution="Ask the user to answer the approval questions already waiting, then send this call again.",
        )

    def _unavailable(self, question: Question, ref: str) -> ErrorInfo:
        return ErrorInfo(
            code=ErrorCode.APPROVAL_UNAVAILABLE,
            message=f"{question.tool}() was not run: this server asks the user before such calls "
            f"(approval = {self.mode}), and this client cannot ask its user (it has no elicitation "
            "capability). Nothing was done.",
            tool_name=ref,
            solution="Carry on without this tool and tell the user it needs approval; the operator can use a "
            'client that supports elicitation, or set approval_fallback = "allow".',
        )
