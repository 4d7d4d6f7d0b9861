"""The store: what outlives a call and a process, in one database every replica shares.

Owns: the connection to the database (`database_url`: an embedded SQLite file in the data folder by
default, or ``postgresql://...`` through psycopg 3's pool, extra ``attp-server[postgres]``), the
schema of each part that keeps rows there, the handles table (`handles`), approval round trips
relayed between replicas (`rounds`), the server's shared secret (`secret_file`), and where the server's own
files may lie and with which modes (`layout`: never inside the workspace; for the server's user only).
May import: the foundations only. May be imported by: `sessions`, `run`, `faces`, `toolpacks`.

How other parts use it:

* The server opens one `Store` at start (`open_store(settings)`, an async context manager) and hands
  it down; the runtime's sessions use `store.handles`. Nothing here blocks the event loop: SQLite runs
  on the store's own threads (a `small` transaction on the loop, when it need not wait; see `sqlite`),
  PostgreSQL on an async pool.
* A part with tables of its own (the memory pack's pages, OAuth tokens) declares them as idempotent
  steps and calls ``await store.migrate("its-part", STEPS)`` once at start (`schema.migrate`); it then
  runs SQL with ``await store.backend.transaction([(sql, params), ...])`` (``?`` placeholders, SQL that
  both SQLite and PostgreSQL accept; see `backend`), or `transaction_sync` from a tool's thread.
  `store.backend.kind` says which database it is when the SQL must differ.
* Keyed digests (folder names, row keys) come from `store.secret.digest(purpose, text)`, and the key
  that seals ``requestState`` from `store.secret.key("request-state")`: equal on every replica that
  shares `secret_file`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

from attp_server.errors import AttpError
from attp_server.settings import Settings
from attp_server.store.backend import Backend, StoreError
from attp_server.store.handles import LEASE_S, HandleStore
from attp_server.store.layout import STATE_FILE_NAME, data_folder
from attp_server.store.postgres import CONNECT_TIMEOUT_S
from attp_server.store.rounds import ROUNDS, RoundStore
from attp_server.store.schema import HANDLES, migrate
from attp_server.store.secret import SECRET_FILE_NAME, Secret, load_secret

__all__ = ["STATE_FILE_NAME", "Backend", "Store", "StoreError", "data_folder", "open_backend", "open_store"]


class Store:
    """The database (`backend`), the handles table on it (`handles`), and the shared secret (`secret`)."""

    def __init__(self, backend: Backend, secret: Secret, lease_s: float = LEASE_S) -> None:
        self.backend = backend
        self.secret = secret
        self.handles = HandleStore(backend, lease_s)
        self.rounds = RoundStore(backend)

    @property
    def kind(self) -> str:
        return self.backend.kind

    async def migrate(self, part: str, steps: Sequence[Sequence[str]]) -> None:
        """Create or bring up to date the tables of `part` (see `schema.migrate`). Raises `StoreError`."""
        await migrate(self.backend, part, steps)


async def open_backend(url: str | None, folder: Path, timeout_s: float = CONNECT_TIMEOUT_S) -> Backend:
    """Connect to `url` (None: the SQLite file in `folder`), waiting at most `timeout_s`. Raises `StoreError`."""
    if url is None or url.startswith("sqlite:"):
        from attp_server.store.sqlite import SQLiteBackend

        path = folder / STATE_FILE_NAME if url is None else Path(url.removeprefix("sqlite:").removeprefix("//"))
        return SQLiteBackend(path)
    if url.startswith(("postgresql://", "postgres://")):
        from attp_server.store.postgres import PostgresBackend

        backend = PostgresBackend(url, timeout_s)
        await backend.open()
        return backend
    raise StoreError(
        "database_url must be postgresql://USER:PASSWORD@HOST:PORT/DATABASE, sqlite:///PATH, or unset "
        "(an SQLite file in the data folder)"
    )


@asynccontextmanager
async def open_store(settings: Settings) -> AsyncIterator[Store]:
    """The store `settings` name, with its tables up to date; closed on exit.

    Raises:
        AttpError: the database cannot be reached or set up, or the secret file cannot be read.
    """
    folder = data_folder(settings)
    secret_path = settings.secret_file if settings.secret_file is not None else folder / SECRET_FILE_NAME
    secret = load_secret(secret_path.resolve(), generate=settings.secret_file is None)
    try:
        url = settings.database_url.get_secret_value() if settings.database_url is not None else None
        backend = await open_backend(url, folder, settings.database_timeout_s)
    except StoreError as exc:
        raise AttpError(str(exc)) from None
    try:
        store = Store(backend, secret, settings.session_lease_s)
        try:
            await store.migrate("handles", HANDLES)
            await store.migrate("rounds", ROUNDS)
        except StoreError as exc:
            raise AttpError(f"cannot set up the store's tables: {exc}") from None
        yield store
    finally:
        await backend.close()
