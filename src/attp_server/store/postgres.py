"""The shared backend: PostgreSQL through psycopg 3's async connection pool (extra ``attp-server[postgres]``).

Every replica that serves the same users points `database_url` at the same database. The pool is
small (a statement takes well under a millisecond on a local network): `MAX_CONNECTIONS` per server
process. `sync_pool` gives code already on a thread (a toolpack's synchronous tool) its own small
pool of ordinary connections to the same database.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from attp_server.store.backend import Backend, Rows, Statement, StoreError

MIN_CONNECTIONS = 1
MAX_CONNECTIONS = 8
CONNECT_TIMEOUT_S = 10.0
_PLACEHOLDER = re.compile(r"\?")


def redacted(url: str) -> str:
    """The URL without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = netloc[0].split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[1]}"))


def missing_driver() -> StoreError:
    return StoreError(
        "database_url names PostgreSQL, and its driver is not installed: pip install 'attp-server[postgres]' "
        "(psycopg 3 and psycopg_pool)"
    )


def _sql(sql: str) -> str:
    return _PLACEHOLDER.sub("%s", sql)


async def _run(conn: Any, sql: str, params: Sequence[Any]) -> Rows:
    cursor = await conn.execute(_sql(sql), tuple(params))
    return list(await cursor.fetchall()) if cursor.description is not None else []


class PostgresBackend(Backend):
    kind = "postgresql"

    def __init__(self, url: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
        try:
            from psycopg_pool import AsyncConnectionPool
        except ImportError:
            raise missing_driver() from None
        self.url = url
        self.label = redacted(url)
        self.timeout_s = timeout_s
        """How long to wait for a connection (the `database_timeout_s` setting)."""
        self._pool: Any = AsyncConnectionPool(
            url,
            min_size=MIN_CONNECTIONS,
            max_size=MAX_CONNECTIONS,
            open=False,
            timeout=self.timeout_s,
            kwargs={"autocommit": True},
            name="attp-store",
        )
        self._sync: Any = None
        self._sync_lock = threading.Lock()

    async def open(self) -> None:
        import psycopg_pool

        try:
            await self._pool.open(wait=True, timeout=self.timeout_s)
        except psycopg_pool.PoolTimeout:
            await self._pool.close()
            raise StoreError(
                f"cannot connect to the store {self.label} within {self.timeout_s:g} s: is the database running, "
                "and do the host, port, user, password and database name in database_url match it?"
            ) from None

    async def transaction(self, statements: Sequence[Statement], *, small: bool = False) -> list[Rows]:
        import psycopg
        import psycopg_pool

        try:
            async with self._pool.connection() as conn:
                if len(statements) == 1:  # autocommit: one round trip, no BEGIN and COMMIT around it
                    return [await _run(conn, *statements[0])]
                async with conn.transaction():
                    return [await _run(conn, sql, params) for sql, params in statements]
        except psycopg_pool.PoolTimeout:
            raise StoreError(f"no connection to the store {self.label} came free within {self.timeout_s:g} s") from None
        except psycopg.Error as exc:
            raise StoreError(f"the store {self.label} failed: {str(exc).strip()}") from None

    def transaction_sync(self, statements: Sequence[Statement]) -> list[Rows]:
        import psycopg
        import psycopg_pool

        pool = self.sync_pool()
        try:
            with pool.connection() as conn, conn.transaction():
                results: list[Rows] = []
                for sql, params in statements:
                    cursor = conn.execute(_sql(sql), tuple(params))
                    results.append(list(cursor.fetchall()) if cursor.description is not None else [])
                return results
        except psycopg_pool.PoolTimeout:
            raise StoreError(f"no connection to the store {self.label} came free within {self.timeout_s:g} s") from None
        except psycopg.Error as exc:
            raise StoreError(f"the store {self.label} failed: {str(exc).strip()}") from None

    def _no_connection(self) -> StoreError:
        return StoreError(f"no connection to the store {self.label} came free within {self.timeout_s:g} s")

    def sync_pool(self) -> Any:
        """A `psycopg_pool.ConnectionPool` (blocking) to the same database, opened on first use."""
        with self._sync_lock:
            if self._sync is None:
                from psycopg_pool import ConnectionPool

                self._sync = ConnectionPool(
                    self.url, min_size=0, max_size=MAX_CONNECTIONS, open=True, timeout=self.timeout_s,
                    kwargs={"autocommit": False}, name="attp-store-sync",
                )  # fmt: skip
            return self._sync

    async def close(self) -> None:
        await self._pool.close()
        if self._sync is not None:
            import anyio

            await anyio.to_thread.run_sync(self._sync.close)
