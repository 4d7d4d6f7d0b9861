"""Sessions as handles: who is calling, which session a call continues, and its state in the store.

MCP 2026-07-28 has no protocol sessions: state that spans calls travels as a *handle*, an opaque
string the server mints (`mint`, 192 bits from the OS's CSPRNG) and the model passes back as the
``session`` input of `attp_execute`. Handshake-era transports still have sessions of their own (a
stdio connection, a Streamable HTTP ``Mcp-Session-Id``, an SSE ``session_id``): each stands for an
*implicit* handle, so their clients keep state without passing anything.

Everything a session has lives in the store (`attp_server.store.handles`), keyed by a keyed digest
of its handle, never the handle itself: its kept variables and functions, its principal (the
token's name, or `ANONYMOUS`), when it was made and last used, and the tools the user allowed for
the rest of it. A call takes its session's lease when it starts (`Sessions.open`, waiting while
another call on the same session runs, on this replica or another), renews it while it runs
(`Sessions.held`), and writes the state back and gives the lease up when its run ends
(`Sessions.finish`). A handle another principal presents, an unknown one and an expired one
(`session_idle_s` unused, or older than `session_max_age_s`) are refused alike with
``SESSION_NOT_FOUND``: nobody learns whether someone else's handle exists.

Bounds: `max_state_bytes` per session (`kept_state`), `max_sessions_per_principal` (past it the
principal's session used longest ago ends), `max_total_state_bytes` for all (past it the sessions
used longest ago lose their kept state, and are told so on their next call: `EVICTED`).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio

from attp_server.errors import ErrorCode, ErrorInfo, short_repr
from attp_server.sessions.kept_state import KeptState
from attp_server.settings import Settings
from attp_server.store import Store
from attp_server.store.handles import (
    KIND_CONNECTION,
    KIND_HANDLE,
    KIND_LASTING,
    Busy,
    Expired,
    Missing,
    Record,
)

logger = logging.getLogger(__name__)

STDIO_SESSION = "stdio"
"""The session id of a stdio connection: one process serves one client."""
ANONYMOUS = "(anonymous)"
"""The principal of every caller without a token (stdio, HTTP without auth): not a valid token name."""
HANDLE = re.compile(r"[A-Za-z0-9_-]{16,128}")
"""What a handle looks like; anything else is refused before the store is asked."""
HANDLE_BYTES = 24
"""Random bytes in a minted handle (192 bits; the contract asks for at least 128)."""
DECODED_BYTES = 32 * 1024 * 1024
"""Most text of sessions' states this process keeps parsed, for the next call on the same session."""
LARGE_STATE = 64 * 1024
"""Past this size, state is turned into JSON text and back on a thread, not the event loop."""

EVICTED = (
    "The variables kept from this session's earlier calls were dropped: the server holds a bounded amount of "
    "session state for all its sessions, and this session's was used longest ago."
)
RESTARTED = (
    "This connection's earlier session ended (unused for session_idle_s): the variables kept from its earlier calls "
    "are gone, and this call started afresh."
)


def mint() -> str:
    """A new handle: unguessable, URL-safe, 32 characters."""
    return secrets.token_urlsafe(HANDLE_BYTES)


@dataclass(frozen=True)
class Caller:
    """Who is calling, as the MCP face tells it. None of it is trusted as a name or a path."""

    session: str | None = None
    """The transport's session id (handshake era); None when the request has none (2026-07-28, the CLI)."""
    tenant: str | None = None
    """The name of the token the request carried (a name from `auth_tokens`, or "default" for `auth_token`)."""
    label: str = "-"
    """A short, non-secret label for the log line."""
    person: str | None = None
    """The principal a signed-in request's access token names (its `oauth_principal_claim`); never a token's
    holder's name (sign-in refuses those)."""
    groups: frozenset[str] = frozenset()
    """The signed-in principal's groups (`oauth_groups_claim`)."""
    credential: str | None = field(default=None, repr=False)
    """The signed-in request's access token, for upstream servers that exchange it for their own (RFC 8693)."""

    @property
    def principal(self) -> str:
        """Whose sessions these are: the signed-in principal, the token's name, or the one anonymous principal."""
        return self.person or self.tenant or ANONYMOUS


@dataclass(eq=False)
class Session:
    """One call's view of its session: read when the call starts, written back when its run ends."""

    key: str
    """The store's key: a keyed digest of the handle (or of the transport's session). Safe as a folder name."""
    principal: str
    kind: str
    handle: str | None = None
    """What the model passes back as ``session`` (for a handshake-era transport's session, a handle derived from
    it: its client need not pass it, and may)."""
    kept: KeptState | None = None
    """The variables and functions its programs left (`session_state`)."""
    approved: set[tuple[str, str]] = field(default_factory=set)
    """(pack, tool) pairs the user allowed for the rest of the session (approvals)."""
    added: set[tuple[str, str]] = field(default_factory=set)
    """Of those, the ones allowed during this call (written when it ends)."""
    lease: str | None = None
    """Set while this call holds the session in the store."""
    stored: bool = False
    """The store has a row for it (False: minted by this call and not written yet)."""
    changed: bool = False
    """This call's run changed `kept`: written back when the call ends."""
    evicted: bool = False
    """Its kept state was dropped to make room; this call is told so."""
    notice: str | None = None
    """Something the model should read in this call's hint (`EVICTED`, `RESTARTED`)."""
    locked: bool = False
    """This call holds the session's turn on this replica (`Sessions.finish` gives it back)."""

    @property
    def folder(self) -> str:
        """The name of its own folder under ``isolation = "session"``: the same on every replica."""
        return self.key

    def allow(self, tool: tuple[str, str]) -> None:
        """The user allowed `tool` (pack, name) for the rest of the session."""
        if tool not in self.approved:
            self.approved.add(tool)
            self.added.add(tool)

    def keep(self, kept: KeptState | None) -> None:
        self.kept, self.changed = kept, True

    @property
    def returned(self) -> str | None:
        """The handle the result carries: one the store keeps (a new session with nothing to keep has none; a
        transport's session shows its handle only while it keeps something, since its client need not pass it)."""
        if not self.stored:
            return None
        if self.kind != KIND_HANDLE and self.kept is None and not self.approved:
            return None
        return self.handle


class SessionRefused(Exception):
    """The call's session cannot be used; `info` says why and what to do."""

    def __init__(self, info: ErrorInfo) -> None:
        super().__init__(info.message)
        self.info = info


def not_found(handle: str, settings: Settings) -> ErrorInfo:
    return ErrorInfo(
        code=ErrorCode.SESSION_NOT_FOUND,
        message=f"no session {short_repr(handle, 60)} is open for you on this server: it was unused for "
        f"session_idle_s = {settings.session_idle_s:g} s or is older than session_max_age_s = "
        f"{settings.session_max_age_s:g} s, was ended to make room for newer sessions, or was never returned to "
        "your token. The variables kept in it are gone.",
        parameter_name="session",
        solution="Call attp_execute again without session to start a new session, define again in that program "
        "whatever it needs from earlier calls, and pass the session value its reply returns on later calls.",
    )


def busy(waited: float) -> ErrorInfo:
    return ErrorInfo(
        code=ErrorCode.SERVER_BUSY,
        message=f"another call on this session is still running after {waited:.0f} s of waiting; calls on one "
        "session run one at a time, so that none loses the variables another keeps",
        solution="Wait for the other call's reply, then send this one again (or send it without session if it "
        "does not need the kept variables).",
    )


class Sessions:
    """The sessions of every replica that shares the store, seen from this server process."""

    def __init__(self, settings: Settings, store: Store, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.store = store
        self.clock = clock
        self.instance = secrets.token_hex(8)
        """This server process, among the replicas: the owner of its stdio connection's implicit session."""
        self.wait_s = max(settings.queue_timeout_s + settings.timeout_s, store.handles.lease_s + 5)
        """How long a call waits for its session while another call holds it: at least long enough for the lease
        of a replica that died mid-run to run out."""
        self._local: dict[str, _Turns] = {}
        self._decoded: OrderedDict[str, tuple[str, KeptState | None]] = OrderedDict()
        """The last state read or written per session, with its text: the same text is not parsed again."""
        self._decoded_bytes = 0
        self.active = 0
        """Sessions in the store, all replicas' (as of the last `sweep`)."""
        self.removed_listeners: list[Callable[[list[str]], Awaitable[None]]] = []
        """Told the keys of sessions that ended (isolation removes their folders)."""

    @property
    def idle_s(self) -> float:
        return self.settings.session_idle_s

    def key_of(self, handle: str) -> str:
        return self.store.secret.digest("handle", handle)

    def implicit_handle(self, caller: Caller) -> str | None:
        """The handle a handshake-era transport's session stands for (None: it has none). A keyed digest of the
        transport's session id, its principal and this process: nobody can derive it without the secret."""
        if caller.session is None:
            return None
        return self.store.secret.digest("implicit", f"{caller.principal}\0{self.instance}\0{caller.session}")

    def implicit_key(self, caller: Caller) -> str | None:
        handle = self.implicit_handle(caller)
        return self.key_of(handle) if handle is not None else None

    async def open(self, caller: Caller, handle: str | None, own_folder: bool | None = None) -> Session:
        """The session a call continues (`handle`, or its transport's), taken for this call; or a new one.

        A new session is minted, not stored: it is written when the call ends, if there is anything to keep
        (under ``isolation = "session"`` at once, since its folder needs an owner; `own_folder` says whether the
        caller's calls have one, default: the server's ``isolation`` is ``session``).

        Raises:
            SessionRefused: ``SESSION_NOT_FOUND`` (not this principal's, unknown, expired), or ``SERVER_BUSY``
                (another call on it ran past the wait).
        """
        principal = caller.principal
        if handle is not None:
            if not HANDLE.fullmatch(handle):
                raise SessionRefused(not_found(handle, self.settings))
            return await self._take(self.key_of(handle), principal, handle, None)
        implicit = self.implicit_handle(caller)
        if implicit is not None:
            kind = KIND_LASTING if caller.session == STDIO_SESSION else KIND_CONNECTION
            return await self._take(self.key_of(implicit), principal, implicit, kind)
        handle = mint()
        session = Session(self.key_of(handle), principal, KIND_HANDLE, handle)
        if own_folder if own_folder is not None else self.settings.isolation == "session":
            session.lease = secrets.token_hex(8)
            turns = self._turns(session.key)
            await turns.lock.acquire()
            try:
                await self.store.handles.create(
                    session.key, principal, kind=KIND_HANDLE, now=self.clock(), lease=session.lease
                )
            except BaseException:
                self._release(session.key, turns)
                raise
            session.stored = session.locked = True
            try:
                await self._within_cap(principal)
            except BaseException:
                await self._give_back(session.key, session.lease)
                self._release(session.key, turns)
                raise
        return session

    async def _give_back(self, key: str, lease: str) -> None:
        """Return a lease taken by a call that then failed or was cancelled before it could run, so that the
        session is free at once rather than when the lease runs out."""
        with anyio.CancelScope(shield=True):
            try:
                await self.store.handles.finish(
                    key, lease, now=self.clock(), state=None, state_bytes=0, write_state=False
                )
            except Exception as exc:
                logger.warning("could not give a session's lease back (it runs out by itself): %s", exc)

    async def _take(self, key: str, principal: str, handle: str | None, create: str | None) -> Session:
        turns = self._turns(key)
        started = time.monotonic()
        try:
            turns.lock.acquire_nowait()  # the common case: no other call on it here
            free = True
        except anyio.WouldBlock:
            free = False
        if not free:
            with anyio.move_on_after(self.wait_s) as waited:
                await turns.lock.acquire()  # calls on this replica queue here, without asking the store
            if waited.cancelled_caught:
                self._release(key, turns, held=False)
                raise SessionRefused(busy(time.monotonic() - started))
        try:
            session = await self._claim(key, principal, handle, create, started)
        except BaseException:
            self._release(key, turns)
            raise
        session.locked = True
        return session

    async def _claim(self, key: str, principal: str, handle: str | None, create: str | None, started: float) -> Session:
        delay, notice = 0.02, None
        while True:
            lease, now = secrets.token_hex(8), self.clock()
            # Shielded: a call cancelled while the store grants the lease must still know it has it, to give it back.
            with anyio.CancelScope(shield=True):
                got = await self.store.handles.claim(
                    key, principal, lease, now=now, idle_s=self.idle_s,
                    max_age_s=self.settings.session_max_age_s, create=create, instance=self.instance,
                    approvals=self.settings.approval != "never",
                )  # fmt: skip
            if isinstance(got, Record):
                try:
                    session = Session(key, principal, got.kind, handle, approved=_tools(got.approved), lease=lease)
                    session.stored, session.evicted = True, got.evicted
                    session.notice = EVICTED if got.evicted else notice
                    if got.state is not None:
                        session.kept = await self._read(key, got.state, got.state_bytes)
                    if create is not None and got.created == now:  # a transport session's first call: counted too
                        await self._within_cap(principal)
                except BaseException:
                    await self._give_back(key, lease)
                    raise
                return session
            if isinstance(got, Busy):  # another replica's call holds it: ask again shortly
                if time.monotonic() - started + delay > self.wait_s:
                    raise SessionRefused(busy(time.monotonic() - started))
                await anyio.sleep(delay)
                delay = min(delay * 2, 0.25)
                continue
            if isinstance(got, Expired):
                await self.removed([key])
                if create is not None and notice is None:  # a transport session outlived its state: start afresh
                    notice = RESTARTED
                    continue
            assert isinstance(got, Missing | Expired)
            raise SessionRefused(not_found(handle or "?", self.settings))

    @asynccontextmanager
    async def held(self, session: Session | None) -> AsyncIterator[None]:
        """Keep the session's lease while the block runs (renewed every third of the lease's life)."""
        if session is None or session.lease is None:
            yield
            return
        # Most calls end long before the first renewal: a timer, not a task, waits for it.
        loop = asyncio.get_running_loop()
        renewing: list[asyncio.Task[None]] = []
        timer = loop.call_later(
            self.store.handles.lease_s / 3, lambda: renewing.append(loop.create_task(self._renew(session)))
        )
        try:
            yield
        finally:
            timer.cancel()
            if renewing:
                renewing[0].cancel()
                with anyio.CancelScope(shield=True):
                    await asyncio.wait(renewing)

    async def _renew(self, session: Session) -> None:
        assert session.lease is not None
        while True:
            try:
                if not await self.store.handles.renew(session.key, session.lease, now=self.clock()):
                    logger.warning("a session's lease ran out while its call was running; its state will not be saved")
                    return
            except Exception as exc:
                logger.warning("could not renew a session's lease: %s", exc)
            await anyio.sleep(self.store.handles.lease_s / 3)

    async def finish(self, session: Session | None) -> None:
        """The call ended: write what changed and give the session back. Never raises for the store's sake: a
        result already made is not lost because its state could not be written (that is logged)."""
        if session is None:
            return
        with anyio.CancelScope(shield=True):
            try:
                await self._write(session)
            except Exception:
                logger.exception("could not write a session's state to the store")
            finally:
                if session.locked:
                    self._release(session.key, self._local.get(session.key))
                session.lease, session.locked = None, False

    async def _write(self, session: Session) -> None:
        now = self.clock()
        text, size = None, 0
        if session.changed and session.kept is not None:
            text, size = await _encode(session.kept), session.kept.size
            self._remember(session.key, text, session.kept)
        if session.lease is not None:
            written = await self.store.handles.finish(
                session.key, session.lease, now=now, state=text, state_bytes=size,
                write_state=session.changed, approved=_names(session.added),
            )  # fmt: skip
            if not written:
                logger.warning("a session's lease was lost before its call ended; the call's state was not saved")
            return
        if session.kind == KIND_HANDLE and not session.stored and (text is not None or session.added):
            await self.store.handles.create(
                session.key, session.principal, kind=KIND_HANDLE, now=now, state=text, state_bytes=size,
                approved=_names(session.added),
            )  # fmt: skip
            session.stored = True
            await self._within_cap(session.principal)

    async def _within_cap(self, principal: str) -> None:
        ended = await self.store.handles.over_cap(principal, self.settings.max_sessions_per_principal, now=self.clock())
        await self.removed(ended)

    async def _read(self, key: str, text: str, size: int) -> KeptState | None:
        cached = self._decoded.get(key)
        if cached is not None and cached[0] == text:
            self._decoded.move_to_end(key)
            return cached[1]
        kept = await _decode(text, size)
        self._remember(key, text, kept)
        return kept

    def _remember(self, key: str, text: str, kept: KeptState | None) -> None:
        old = self._decoded.pop(key, None)
        self._decoded_bytes -= len(old[0]) if old is not None else 0
        if len(text) > DECODED_BYTES // 4:
            return
        self._decoded[key] = (text, kept)
        self._decoded_bytes += len(text)
        while self._decoded_bytes > DECODED_BYTES:
            _, (dropped, _) = self._decoded.popitem(last=False)
            self._decoded_bytes -= len(dropped)

    # ---------------------------------------------------------------- ending sessions

    async def removed(self, keys: list[str]) -> None:
        """Sessions ended (their rows are gone): tell the listeners (isolation removes their folders)."""
        if not keys:
            return
        for listener in self.removed_listeners:
            await listener(keys)

    async def sweep(self) -> None:
        """What any replica does now and then: expire idle and old sessions, keep the total state within bounds,
        and keep this process's stdio session alive."""
        now = self.clock()
        handles = self.store.handles
        await handles.touch_instance(self.instance, now=now)
        ended = await handles.expire(now=now, idle_s=self.idle_s, max_age_s=self.settings.session_max_age_s)
        await self.removed(ended)
        await handles.trim_state(self.settings.max_total_state_bytes, now=now)
        self.active = (await handles.stats())["handles"]

    async def close(self) -> None:
        """This process is stopping: its connections' implicit sessions end with it."""
        with anyio.CancelScope(shield=True):
            try:
                await self.removed(await self.store.handles.end_instance(self.instance))
            except Exception as exc:
                logger.warning("could not end this process's sessions in the store: %s", exc)

    # ---------------------------------------------------------------- one call at a time, on this replica

    def _turns(self, key: str) -> _Turns:
        turns = self._local.get(key)
        if turns is None:
            turns = self._local[key] = _Turns()
        turns.users += 1
        return turns

    def _release(self, key: str, turns: _Turns | None, *, held: bool = True) -> None:
        if turns is None:
            return
        if held:
            turns.lock.release()
        turns.users -= 1
        if turns.users == 0:
            self._local.pop(key, None)


@dataclass(eq=False)
class _Turns:
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    users: int = 0


def _names(tools: set[tuple[str, str]]) -> list[str]:
    """(pack, tool) pairs as the store keeps them: ``pack.tool``."""
    return [f"{pack}.{name}" for pack, name in sorted(tools)]


def _tools(names: frozenset[str]) -> set[tuple[str, str]]:
    pairs = (name.rpartition(".") for name in names)
    return {(pack, tool) for pack, _, tool in pairs if pack and tool}


def _dumps(kept: KeptState) -> str:
    return json.dumps(kept.stored(), ensure_ascii=False, separators=(",", ":"))


def _loads(text: str, size: int) -> KeptState | None:
    data = json.loads(text)
    return KeptState.from_stored(data, size) if isinstance(data, dict) else None


async def _encode(kept: KeptState) -> str:
    if kept.size > LARGE_STATE:
        return await anyio.to_thread.run_sync(_dumps, kept)
    return _dumps(kept)


async def _decode(text: str, size: int) -> KeptState | None:
    try:
        if len(text) > LARGE_STATE:
            return await anyio.to_thread.run_sync(functools.partial(_loads, text, size))
        return _loads(text, size)
    except (ValueError, AttributeError):
        logger.warning("a session's stored state could not be read; the session starts without it")
        return None
