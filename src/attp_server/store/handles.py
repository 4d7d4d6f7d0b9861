"""The handles table: each handle's kept state and metadata, and the tools allowed for the rest of its session.

A row is keyed by the handle's keyed digest (`Secret.digest`), never the handle itself: whoever reads
the database cannot present its keys as handles. A row belongs to one principal; every read and
write names it, so another principal's handle is indistinguishable from one that does not exist.

Two calls on one handle never run at once, on any replica: a call first takes the row's *lease*
(`claim`: a compare-and-set on ``lease``/``lease_until``), renews it while it runs (`renew`), and
gives it back with the new state in one transaction when its run ends (`finish`). A replica that dies
mid-run stops renewing; its lease runs out after `lease_s` (the `session_lease_s` setting, `LEASE_S` by
default) and the next call takes the handle with the state of the last run that ended. Times are seconds
since the epoch (`time.time()`), shared by replicas whose clocks agree to well within `lease_s`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from attp_server.store.backend import SMALL_BYTES, Backend, Statement

LEASE_S = 15.0
"""How long a lease lasts unless renewed, by default; a running call renews it every third of that."""

KIND_HANDLE = "handle"
"""Minted by the server and passed back by the model (`session`)."""
KIND_CONNECTION = "connection"
"""Stands for a handshake-era Streamable HTTP or SSE session; expires by idleness like a handle."""
KIND_LASTING = "lasting"
"""Stands for a stdio connection: kept alive by its server process (`touch_instance`) as long as it runs."""


@dataclass(frozen=True)
class Record:
    """A handle as a call finds it."""

    key: str
    principal: str
    kind: str
    created: float
    last_used: float
    state: str | None
    """The kept variables and functions, as the JSON text the sessions part wrote."""
    state_bytes: int
    evicted: bool
    """Its state was dropped to keep the store within its total bound; its next call is told so."""
    approved: frozenset[str]


@dataclass(frozen=True)
class Busy:
    """Another call holds the handle until `until` (unless it finishes sooner)."""

    until: float


@dataclass(frozen=True)
class Expired:
    """The handle was there but idle or old past its limits: it has been removed now."""


@dataclass(frozen=True)
class Missing:
    """No such handle for this principal (never minted, removed, or another principal's)."""


Claim = Record | Busy | Expired | Missing


class HandleStore:
    """Reads and writes of the ``attp_handles`` and ``attp_approvals`` tables."""

    def __init__(self, backend: Backend, lease_s: float = LEASE_S) -> None:
        self.backend = backend
        self.lease_s = lease_s
        """How long a lease lasts unless renewed (every replica sharing the store should agree on it)."""

    async def claim(
        self,
        key: str,
        principal: str,
        lease: str,
        *,
        now: float,
        idle_s: float,
        max_age_s: float,
        create: str | None = None,
        instance: str | None = None,
        approvals: bool = True,
    ) -> Claim:
        """Take the handle's lease for one call and read it, or say why not.

        `create` (a kind) inserts the row first when it is not there (the implicit handles of
        handshake-era sessions, which come into being with their first call). `approvals`: read the
        tools allowed for the rest of the session too (only needed when approvals are asked).
        """
        statements: list[Statement] = []
        if create is not None:
            statements.append(
                (
                    "INSERT INTO attp_handles (key, principal, kind, instance, created, last_used) "
                    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING",
                    (key, principal, create, instance, now, now),
                )
            )
        take = (
            "UPDATE attp_handles SET lease = ?, lease_until = ?, last_used = ? "
            "WHERE key = ? AND principal = ? AND (lease IS NULL OR lease_until < ?) "
            "AND last_used >= ? AND created >= ? "
            "RETURNING key, kind, created, last_used, state_bytes, evicted"
        )
        taking = (lease, now + self.lease_s, now, key, principal, now, now - idle_s, now - max_age_s)
        postgres = self.backend.kind == "postgresql"
        if postgres:  # one statement, one round trip: take it and read its state (and its approvals)
            also = ", ARRAY(SELECT tool FROM attp_approvals WHERE attp_approvals.key = taken.key)" if approvals else ""
            statements.append(
                (
                    f"WITH taken AS ({take}) SELECT taken.kind, taken.created, taken.last_used, taken.state_bytes, "  # noqa: S608
                    f"taken.evicted, attp_state.state{also} FROM taken "
                    "LEFT JOIN attp_state ON attp_state.key = taken.key",
                    taking,
                )
            )
        else:  # a state past SMALL_BYTES is read after, on a thread (see `Backend.transaction`)
            statements.append((take, taking))
            statements.append(
                (
                    "SELECT attp_state.state FROM attp_state JOIN attp_handles ON attp_handles.key = attp_state.key "
                    "WHERE attp_state.key = ? AND attp_handles.lease = ? AND attp_handles.state_bytes <= ?",
                    (key, lease, SMALL_BYTES),
                )
            )
            if approvals:
                statements.append(("SELECT tool FROM attp_approvals WHERE key = ?", (key,)))
        results = await self.backend.transaction(statements, small=True)
        if create is not None:
            results.pop(0)
        if results[0]:
            if postgres:
                kind, created, last_used, state_bytes, evicted, state, *more = results[0][0]
                tools = more[0] if approvals else []
            else:
                _, kind, created, last_used, state_bytes, evicted = results[0][0]
                state = results[1][0][0] if results[1] else None
                tools = [row[0] for row in results[2]] if approvals else []
                if state is None and state_bytes > SMALL_BYTES:
                    state = await self._state(key, lease)
            return Record(
                key, principal, kind, float(created), float(last_used), state, int(state_bytes), bool(evicted),
                frozenset(tools),
            )  # fmt: skip
        # Not taken: say why (a second statement, only on this path).
        found = await self.backend.execute(
            "SELECT lease, lease_until, last_used, created FROM attp_handles WHERE key = ? AND principal = ?",
            key,
            principal,
            small=True,
        )
        if not found:
            return Missing()
        held, until, last_used, created = found[0]
        if held is not None and float(until) >= now:
            return Busy(float(until))
        if float(last_used) < now - idle_s or float(created) < now - max_age_s:
            await self.delete([key])
            return Expired()
        return Busy(now)  # released between the two statements: try again

    async def _state(self, key: str, lease: str) -> str | None:
        """The state of a handle this call holds, read on its own."""
        rows = await self.backend.execute(
            "SELECT attp_state.state FROM attp_state JOIN attp_handles ON attp_handles.key = attp_state.key "
            "WHERE attp_state.key = ? AND attp_handles.lease = ?",
            key,
            lease,
        )
        return rows[0][0] if rows else None

    async def create(
        self,
        key: str,
        principal: str,
        *,
        kind: str,
        now: float,
        state: str | None = None,
        state_bytes: int = 0,
        approved: Iterable[str] = (),
        lease: str | None = None,
        instance: str | None = None,
    ) -> None:
        """Insert a new handle (a minted one: its key is new), optionally with its lease taken."""
        statements: list[Statement] = [
            (
                "INSERT INTO attp_handles "
                "(key, principal, kind, instance, created, last_used, state_bytes, lease, lease_until) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (key, principal, kind, instance, now, now, state_bytes, lease, now + self.lease_s if lease else 0.0),
            )
        ]
        if state is not None:
            statements.append(("INSERT INTO attp_state (key, state) VALUES (?, ?)", (key, state)))
        statements += [
            ("INSERT INTO attp_approvals (key, tool) VALUES (?, ?) ON CONFLICT DO NOTHING", (key, tool))
            for tool in approved
        ]
        await self.backend.transaction(statements, small=state is None or len(state) <= SMALL_BYTES)

    async def renew(self, key: str, lease: str, *, now: float) -> bool:
        """Extend a lease this call holds; False when it has been lost (ran out and was taken)."""
        rows = await self.backend.execute(
            "UPDATE attp_handles SET lease_until = ? WHERE key = ? AND lease = ? RETURNING key",
            now + self.lease_s,
            key,
            lease,
            small=True,
        )
        return bool(rows)

    async def finish(
        self,
        key: str,
        lease: str,
        *,
        now: float,
        state: str | None,
        state_bytes: int,
        write_state: bool,
        approved: Iterable[str] = (),
    ) -> bool:
        """Give the lease back; with `write_state`, store the run's state in the same transaction.

        False when the lease was no longer this call's (nothing is written then)."""
        statements: list[Statement] = []
        if write_state and self.backend.kind == "postgresql":
            # One statement, one round trip: the release first (it locks the row, then checks the lease), and the
            # state only if it was released (another replica taking a lease that ran out waits for the lock).
            release = (
                "UPDATE attp_handles SET state_bytes = ?, evicted = 0, lease = NULL, lease_until = 0, last_used = ? "
                "WHERE key = ? AND lease = ? RETURNING key"
            )
            if state is not None:
                change = (
                    "INSERT INTO attp_state (key, state) SELECT key, ? FROM released "
                    "ON CONFLICT (key) DO UPDATE SET state = excluded.state"
                )
                params: tuple[object, ...] = (state_bytes, now, key, lease, state)
            else:
                change, params = "DELETE FROM attp_state WHERE key IN (SELECT key FROM released)", (0, now, key, lease)
            statements.append((f"WITH released AS ({release}), changed AS ({change}) SELECT key FROM released", params))  # noqa: S608
        elif write_state and state is not None:  # only while the lease is this call's
            statements.append(
                (
                    "INSERT INTO attp_state (key, state) SELECT key, ? FROM attp_handles WHERE key = ? AND lease = ? "
                    "ON CONFLICT (key) DO UPDATE SET state = excluded.state",
                    (state, key, lease),
                )
            )
        elif write_state:
            statements.append(
                (
                    "DELETE FROM attp_state WHERE key IN (SELECT key FROM attp_handles WHERE key = ? AND lease = ?)",
                    (key, lease),
                )
            )
        if write_state and self.backend.kind != "postgresql":
            statements.append(
                (
                    "UPDATE attp_handles SET state_bytes = ?, evicted = 0, lease = NULL, lease_until = 0, "
                    "last_used = ? WHERE key = ? AND lease = ? RETURNING key",
                    (state_bytes if state is not None else 0, now, key, lease),
                )
            )
        elif not write_state:
            statements.append(
                (
                    "UPDATE attp_handles SET lease = NULL, lease_until = 0, last_used = ? "
                    "WHERE key = ? AND lease = ? RETURNING key",
                    (now, key, lease),
                )
            )
        released = len(statements) - 1
        statements += [
            ("INSERT INTO attp_approvals (key, tool) SELECT key, ? FROM attp_handles WHERE key = ? "
             "ON CONFLICT DO NOTHING", (tool, key))
            for tool in approved
        ]  # fmt: skip
        small = not write_state or state is None or len(state) <= SMALL_BYTES
        results = await self.backend.transaction(statements, small=small)
        return bool(results[released])

    async def delete(self, keys: Sequence[str]) -> None:
        """Remove handles (and their approvals); removing one already gone is no error."""
        if keys:
            await self.backend.transaction([("DELETE FROM attp_handles WHERE key = ?", (key,)) for key in keys])

    async def expire(self, *, now: float, idle_s: float, max_age_s: float) -> list[str]:
        """Remove every handle idle past `idle_s` or older than `max_age_s` that no call holds; their keys."""
        rows = await self.backend.execute(
            "DELETE FROM attp_handles WHERE (last_used < ? OR created < ?) AND (lease IS NULL OR lease_until < ?) "
            "RETURNING key",
            now - idle_s,
            now - max_age_s,
            now,
        )
        return [row[0] for row in rows]

    async def over_cap(self, principal: str, max_handles: int, *, now: float) -> list[str]:
        """Past `max_handles` handles for `principal`, remove the ones used longest ago (none in use); their keys."""
        rows = await self.backend.execute(
            "SELECT key FROM attp_handles WHERE principal = ? AND (lease IS NULL OR lease_until < ?) "
            "ORDER BY last_used DESC LIMIT -1 OFFSET ?"
            if self.backend.kind == "sqlite"
            else "SELECT key FROM attp_handles WHERE principal = ? AND (lease IS NULL OR lease_until < ?) "
            "ORDER BY last_used DESC OFFSET ?",
            principal,
            now,
            max_handles,
        )
        keys = [row[0] for row in rows]
        await self.delete(keys)
        return keys

    async def trim_state(self, max_total_bytes: int, *, now: float) -> int:
        """Past `max_total_bytes` of state in all, drop the state of handles used longest ago (marked `evicted`, so
        their next call is told); how many lost theirs.

        Each principal that keeps state has an equal share of the total, and only the handles of principals past
        their share lose theirs, each principal's own used longest ago first: one principal's many sessions never
        evict another's that keeps within its share (a principal alone may use the whole total)."""
        (total,) = (await self.backend.execute("SELECT COALESCE(SUM(state_bytes), 0) FROM attp_handles"))[0]
        if int(total) <= max_total_bytes:
            return 0
        rows = await self.backend.execute(
            "SELECT key, principal, state_bytes, CASE WHEN lease IS NULL OR lease_until < ? THEN 1 ELSE 0 END "
            "FROM attp_handles WHERE state_bytes > 0 ORDER BY last_used",
            now,
        )
        held: dict[str, int] = {}
        for _, principal, size, _ in rows:
            held[principal] = held.get(principal, 0) + int(size)
        excess = sum(held.values()) - max_total_bytes
        if excess <= 0:
            return 0
        share = max_total_bytes / len(held)
        chosen = []
        for key, principal, size, free in rows:
            if excess <= 0:
                break
            if not free or held[principal] <= share:
                continue
            chosen.append(key)
            held[principal] -= int(size)
            excess -= int(size)
        drops: list[Statement] = []
        for key in chosen:
            drops.append(
                ("DELETE FROM attp_state WHERE key IN (SELECT key FROM attp_handles WHERE key = ? AND lease IS NULL)",
                 (key,))
            )  # fmt: skip
            drops.append(
                ("UPDATE attp_handles SET state_bytes = 0, evicted = 1 WHERE key = ? AND lease IS NULL", (key,))
            )
        await self.backend.transaction(drops)
        return len(chosen)

    async def touch_instance(self, instance: str, *, now: float) -> None:
        """Keep this process's lasting handles (its stdio connection) from expiring by idleness."""
        await self.backend.execute(
            "UPDATE attp_handles SET last_used = ? WHERE instance = ? AND kind = ?", now, instance, KIND_LASTING
        )

    async def end_instance(self, instance: str) -> list[str]:
        """Remove this process's implicit handles (it is stopping: its connections end); their keys."""
        rows = await self.backend.execute("DELETE FROM attp_handles WHERE instance = ? RETURNING key", instance)
        return [row[0] for row in rows]

    async def present(self, keys: Sequence[str]) -> set[str]:
        """Which of `keys` are handles in the store (the rest of a folder sweep's names are leftovers)."""
        found: set[str] = set()
        for start in range(0, len(keys), 500):
            chunk = list(keys[start : start + 500])
            marks = ", ".join("?" for _ in chunk)
            rows = await self.backend.execute(f"SELECT key FROM attp_handles WHERE key IN ({marks})", *chunk)  # noqa: S608
            found.update(row[0] for row in rows)
        return found

    async def stats(self) -> dict[str, int]:
        """How many handles, and the bytes of state they hold in all."""
        ((count, total),) = await self.backend.execute(
            "SELECT COUNT(*), COALESCE(SUM(state_bytes), 0) FROM attp_handles"
        )
        return {"handles": int(count), "state_bytes": int(total)}
