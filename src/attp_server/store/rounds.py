"""Approval round trips that another replica answers (MCP 2026-07-28 ``input_required``).

A program that needs the user's approval pauses on the replica that runs it (its worker is there),
and the call returns ``input_required`` with a ``requestState`` naming the round (sealed by the SDK
with the key every replica derives from `secret_file`). The client's next call, with the answers,
may land on any replica. If it is not the one running the program, that replica *relays*: it writes
the answers into the round's row (`answer`) and waits for the outcome; the running replica, which
polls its rows while it has rounds waiting (`answered`), hands the answers to the program and
writes what came of them (`settle`): the result, or the next questions. The row goes when the
relaying replica has read the outcome, or with the round's expiry.
"""

from __future__ import annotations

from dataclasses import dataclass

from attp_server.store.backend import Backend

ROUNDS: list[list[str]] = [
    [
        """CREATE TABLE IF NOT EXISTS attp_rounds (
            token TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            instance TEXT NOT NULL,
            created DOUBLE PRECISION NOT NULL,
            answers TEXT,
            outcome TEXT
        )""",
        "CREATE INDEX IF NOT EXISTS attp_rounds_by_instance ON attp_rounds (instance)",
    ],
]


@dataclass(frozen=True)
class Answered:
    token: str
    answers: str
    """The client's answers, as the JSON text the relaying replica wrote."""


class RoundStore:
    """Reads and writes of ``attp_rounds``."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    async def open(self, token: str, owner: str, instance: str, *, now: float) -> None:
        """A round is waiting for its answers on `instance`."""
        await self.backend.execute(
            "INSERT INTO attp_rounds (token, owner, instance, created) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
            token,
            owner,
            instance,
            now,
        )

    async def answer(self, token: str, owner: str, answers: str) -> bool:
        """Hand a round's answers to the replica running it; False when there is no such round for `owner` (it
        ended, expired, or was answered already)."""
        rows = await self.backend.execute(
            "UPDATE attp_rounds SET answers = ? WHERE token = ? AND owner = ? AND answers IS NULL RETURNING token",
            answers,
            token,
            owner,
        )
        return bool(rows)

    async def answered(self, instance: str) -> list[Answered]:
        """The rounds running on `instance` whose answers came through another replica, not yet settled."""
        rows = await self.backend.execute(
            "SELECT token, answers FROM attp_rounds WHERE instance = ? AND answers IS NOT NULL AND outcome IS NULL",
            instance,
        )
        return [Answered(token, answers) for token, answers in rows]

    async def settle(self, token: str, outcome: str) -> None:
        """What came of the answers (a result, or the next questions), for the relaying replica."""
        await self.backend.execute("UPDATE attp_rounds SET outcome = ? WHERE token = ?", outcome, token)

    async def outcome(self, token: str) -> tuple[bool, str | None]:
        """(whether the round is still there, its outcome if settled)."""
        rows = await self.backend.execute("SELECT outcome FROM attp_rounds WHERE token = ?", token)
        return (bool(rows), rows[0][0] if rows else None)

    async def close(self, token: str) -> None:
        await self.backend.execute("DELETE FROM attp_rounds WHERE token = ?", token)

    async def expire(self, *, before: float) -> None:
        await self.backend.execute("DELETE FROM attp_rounds WHERE created < ?", before)
