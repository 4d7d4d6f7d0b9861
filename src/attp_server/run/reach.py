"""Each caller's reach under the access rules (`attp_server.access`): the tools it may call, what its model reads
about them (the description, ``help()``, ``tools()``), and the engines, approval mode and rate limit that hold for
it.

Every call runs on its caller's view of the tools (`view`): a tool outside it is refused as absent, and audited.
The views and their catalogs are remembered per grant and registry (a registry's tools are replaced, never changed,
when they change, so a remembered view is never stale), at most `MAX_VIEWS`. `update` applies an edit of the rules
while serving. Without rules, every caller sees everything and nothing is remembered. A call without a caller (the
CLI: the operator) is not restricted.
"""

from __future__ import annotations

import hashlib
import logging
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from attp_server.access.policy import Grant, Policy
from attp_server.access.view import view as restricted
from attp_server.errors import ErrorCode, ErrorInfo
from attp_server.model.catalog import Catalog
from attp_server.ops.rate_limits import known_principals, principal_of
from attp_server.sessions.registry import Caller
from attp_server.settings import Settings
from attp_server.store import Store
from attp_server.toolpack import ToolRegistry

logger = logging.getLogger(__name__)

MAX_VIEWS = 256


def for_caller(caller: Caller | None) -> dict[str, Any]:
    """A run's fields that say whom it is for: its principal (rate limits, metrics, the audit log), whom upstream
    servers that see the person act for, and the signed-in caller's access token (token exchange)."""
    name = (caller.person or caller.tenant) if caller is not None else None
    return {"principal": principal_of(name), "person": name, "credential": caller.credential if caller else None}


@dataclass(frozen=True)
class View:
    """One caller's tools and what its model reads about them (`catalog` None: the server's own)."""

    tools: ToolRegistry
    catalog: Catalog | None
    grant: Grant | None


class Reach:
    """The access rules of the running configuration, and the views they give."""

    def __init__(self, settings: Settings, store: Store | None = None) -> None:
        """`store`: its secret keys the digests that label principals the configuration does not name."""
        self.settings = settings
        self.policy = Policy(settings.access)
        self.store = store
        self.named = known_principals(settings)
        self._views: OrderedDict[tuple[Grant, int], tuple[dict[str, Any], View]] = OrderedDict()

    @property
    def active(self) -> bool:
        return self.policy.active

    def update(self, settings: Settings) -> bool:
        """Apply the rules of `settings` (an edit while serving); True if they changed."""
        if settings.access == self.settings.access:
            return False
        logger.info("configuration edited: the access rules changed; they apply from the next call")
        self.settings = settings
        self.policy = Policy(settings.access)
        self.named = known_principals(settings)
        self._views.clear()
        return True

    def label(self, caller: Caller | None) -> str:
        """The caller's principal as traces and the call log name it: a name the configuration gives (a token's, or
        one an access rule names) as it is, else ``p-`` and a keyed digest (the same on every replica, and for
        every call of one principal, without the name)."""
        name = principal_of((caller.person or caller.tenant) if caller is not None else None)
        if name in self.named:
            return name
        if self.store is not None:
            return "p-" + self.store.secret.digest("principal", name, 16)
        return "p-" + hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]

    def grant(self, caller: Caller | None) -> Grant | None:
        """What `caller` reaches (None: everything: no rules, or the operator's own command line)."""
        if caller is None or not self.policy.active:
            return None
        return self.policy.grant(principal_of(caller.person or caller.tenant), caller.groups)

    def view(self, caller: Caller | None, registry: ToolRegistry) -> View:
        """`registry` as `caller` may use it."""
        grant = self.grant(caller)
        if grant is None:
            return View(registry, None, None)
        key = (grant, id(registry.tools))
        found = self._views.get(key)
        if found is not None and found[0] is registry.tools:
            self._views.move_to_end(key)
            return found[1]
        tools = restricted(registry, grant)
        settings = self.settings
        if grant.isolation is not None and grant.isolation != settings.isolation:  # its description says so
            settings = settings.model_copy(update={"isolation": grant.isolation})
        made = View(tools, Catalog(tools, settings), grant)
        self._views[key] = (registry.tools, made)  # the dict is held: its id is not reused while remembered
        if len(self._views) > MAX_VIEWS:
            self._views.popitem(last=False)
        return made

    @property
    def separates_sessions(self) -> bool:
        """Whether some caller's calls may work in a folder of their session's own (the server's ``isolation``, or a
        rule's): then a session's folders go when it ends."""
        return self.settings.isolation == "session" or any(
            rule.isolation == "session" for rule in self.policy.rules.values()
        )

    def isolation(self, caller: Caller | None) -> str:
        """Whose files and memory `caller`'s calls see: its access rules' ``isolation``, or the server's."""
        grant = self.grant(caller)
        return grant.isolation if grant is not None and grant.isolation is not None else self.settings.isolation

    def approval(self, caller: Caller | None) -> str:
        """The approval mode of `caller`'s calls: its access rules', or the server's `approval`."""
        grant = self.grant(caller)
        return grant.approval if grant is not None and grant.approval is not None else self.settings.approval

    def refused_engine(self, grant: Grant | None, engine: str) -> ErrorInfo | None:
        """The error for a program in a language the caller's rules do not allow, else None."""
        if grant is None or grant.admits_engine(engine):
            return None
        allowed = ", ".join(sorted(grant.engines or ()))
        return ErrorInfo(
            code=ErrorCode.FORBIDDEN,
            message=f"programs in {engine} are not allowed for you here; you may use {allowed or 'no language'}",
            parameter_name="engine",
            received=engine,
            expected=allowed or None,
            solution=f"Write the program in {allowed} (engine='{sorted(grant.engines or ['python'])[0]}')."
            if allowed
            else "Tell the user their access rules allow no language here.",
        )
