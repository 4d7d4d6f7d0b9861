"""The access rules, matched against one principal: what it reaches, and what holds for it.

With no rule configured, everyone reaches every tool (`Policy.grant` is None). With rules, a principal reaches the
union of the ``tools`` patterns of the rules that name it (``principals``) or one of its groups (``groups``); a
principal no rule matches reaches nothing. Of the optional settings of the matching rules: ``engines`` is their
union (any rule without it: any engine), ``approval`` the strictest one set, ``rate_limit_per_minute`` the largest
one set (a principal gets what its most generous rule gives), ``isolation`` the most separate one set (session, then
tenant, then shared). Grants are remembered per principal and set of groups
(at most `MAX_GRANTS`, the least recently used forgotten first).
"""

from __future__ import annotations

import fnmatch
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

from attp_server.access_config import AccessRule

MAX_GRANTS = 4096
STRICTNESS = {"never": 0, "destructive": 1, "always": 2}
SEPARATION = {"shared": 0, "tenant": 1, "session": 2}


@dataclass(frozen=True)
class Grant:
    """What one principal reaches: the union of its matching rules (named in `rules`)."""

    rules: tuple[str, ...]
    patterns: tuple[str, ...]
    engines: frozenset[str] | None = None
    """The languages its programs may use; None: any the server offers."""
    approval: str | None = None
    """Its approval mode; None: the server's `approval`."""
    rate_limit_per_minute: int | None = None
    """Its tool calls per minute; None: the server's `rate_limit_per_minute`."""
    isolation: str | None = None
    """Whose files and memory its calls see; None: the server's `isolation`."""

    def admits(self, pack: str, tool: str) -> bool:
        """Whether ``pack.tool`` is one of its tools."""
        ref = f"{pack}.{tool}"
        return any(pattern == "*" or fnmatch.fnmatchcase(ref, pattern) for pattern in self.patterns)

    def admits_pack(self, pack: str) -> bool:
        """Whether some tool of `pack` may be its (for a pack whose tools are not known yet)."""
        return any(pattern == "*" or fnmatch.fnmatchcase(pack, pattern.split(".", 1)[0]) for pattern in self.patterns)

    def admits_engine(self, engine: str) -> bool:
        return self.engines is None or engine in self.engines


class Policy:
    """The ``[access.NAME]`` rules of one configuration."""

    def __init__(self, rules: Mapping[str, AccessRule]) -> None:
        self.rules = dict(rules)
        self._grants: OrderedDict[tuple[str, frozenset[str]], Grant] = OrderedDict()

    @property
    def active(self) -> bool:
        """Whether any rule exists (without one, everyone reaches everything)."""
        return bool(self.rules)

    def names(self) -> frozenset[str]:
        """Every principal a rule names (configured names: safe as metric labels)."""
        return frozenset(name for rule in self.rules.values() for name in rule.principals)

    def grant(self, principal: str, groups: frozenset[str] = frozenset()) -> Grant | None:
        """What `principal` (with `groups`) reaches; None when no rule exists (everything)."""
        if not self.rules:
            return None
        key = (principal, groups)
        found = self._grants.get(key)
        if found is not None:
            self._grants.move_to_end(key)
            return found
        found = self._match(principal, groups)
        self._grants[key] = found
        if len(self._grants) > MAX_GRANTS:
            self._grants.popitem(last=False)
        return found

    def _match(self, principal: str, groups: frozenset[str]) -> Grant:
        matched = [
            (name, rule)
            for name, rule in sorted(self.rules.items())
            if principal in rule.principals or groups.intersection(rule.groups)
        ]
        patterns = tuple(dict.fromkeys(pattern for _, rule in matched for pattern in rule.tools))
        languages = [rule.engines for _, rule in matched]
        engines = None if any(e is None for e in languages) else {name for e in languages for name in e or ()}
        approvals = [rule.approval for _, rule in matched if rule.approval is not None]
        limits = [rule.rate_limit_per_minute for _, rule in matched if rule.rate_limit_per_minute is not None]
        isolations = [rule.isolation for _, rule in matched if rule.isolation is not None]
        return Grant(
            rules=tuple(name for name, _ in matched),
            patterns=patterns,
            engines=frozenset(engines) if engines is not None and matched else None,
            approval=max(approvals, key=STRICTNESS.__getitem__) if approvals else None,
            rate_limit_per_minute=max(limits) if limits else None,
            isolation=max(isolations, key=SEPARATION.__getitem__) if isolations else None,
        )
