"""Sign-in: what checking an access token costs the server, with the issuer's keys cached (docs/identity.md).

`faces.signin.Verifier.check` on RS256 JWTs signed here with a key whose public half the verifier already holds
(as after its first fetch of the issuer's JWKS): a token it has not seen (the signature, the claims: what every
new token costs once), and a token it has seen (what every later request with it costs), against the static
token check of the same requests (`faces.http.token_holder`, constant-time comparison) in the same run. Each
sample times a batch of `BATCH` checks, one after another on the event loop, as requests would make them.

``python -m bench.signin`` runs this section alone.
"""

from __future__ import annotations

import json
import time
from typing import Any

import anyio
import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

from attp_server.faces.http import token_holder
from attp_server.faces.signin import Verifier
from attp_server.settings import Settings
from bench.report import Report
from bench.timing import interleaved, ratio

SECTION = "Sign-in (median µs per token check, keys cached; ratios to a static token's check, same run)"

ISSUER = "https://sso.example.com/realms/acme"
PUBLIC_URL = "https://attp.example.com"
BATCH, QUICK_BATCH = 200, 5
REPEATS, QUICK_REPEATS = 60, 3


def _verifier() -> tuple[Verifier, rsa.RSAPrivateKey]:
    """A verifier whose key set holds one RSA key, fetched as it were a moment ago (no network)."""
    settings = Settings(oauth_issuer=ISSUER, public_url=PUBLIC_URL)
    verifier = Verifier(settings)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    verifier.keys.keys = {"k1": jwt.PyJWK({**public, "kid": "k1", "use": "sig", "alg": "RS256"})}
    verifier.keys._fetched_at = time.time()  # as after the first fetch of the JWKS
    return verifier, key


def _token(key: rsa.RSAPrivateKey, number: int) -> str:
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": PUBLIC_URL + "/mcp", "sub": f"person-{number}", "groups": ["engineering"],
              "iat": now, "exp": now + 3600, "jti": f"token-{number}", "scope": "mcp"}  # fmt: skip
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": "k1", "typ": "at+jwt"})


async def signin(report: Report, quick: bool) -> dict[str, Any]:
    verifier, key = _verifier()
    batch = QUICK_BATCH if quick else BATCH
    repeats = QUICK_REPEATS if quick else REPEATS
    fresh = iter([_token(key, n) for n in range(batch * (repeats + 3))])  # each checked once: never seen before
    seen = _token(key, -1)
    await verifier.check(seen)
    tokens = {"attp": b"a-static-token-of-32-characters!"}
    scope = {"type": "http", "headers": [(b"authorization", b"Bearer a-static-token-of-32-characters!")]}

    async def first_checks() -> None:
        for _ in range(batch):
            await verifier.check(next(fresh))

    async def seen_checks() -> None:
        for _ in range(batch):
            await verifier.check(seen)

    async def static_checks() -> None:
        for _ in range(batch):
            token_holder(scope, tokens)

    samples = await interleaved({"first": first_checks, "seen": seen_checks, "static": static_checks}, repeats)
    await verifier.aclose()

    def per_check_us(name: str) -> float:
        ordered = sorted(samples[name])
        return round(ordered[len(ordered) // 2] / batch * 1e6, 2)

    report.add(SECTION, "signin.jwt_first_check_us", per_check_us("first"), "µs")
    report.add(SECTION, "signin.jwt_seen_before_us", per_check_us("seen"), "µs")
    report.add(SECTION, "signin.static_token_us", per_check_us("static"), "µs")
    report.add(SECTION, "signin.first_vs_static", ratio(samples["first"], samples["static"]), "x")
    report.add(SECTION, "signin.seen_vs_static", ratio(samples["seen"], samples["static"]), "x")
    return {name: per_check_us(name) for name in samples}


def main() -> None:
    report = Report(quick=False)
    anyio.run(signin, report, False)
    print(report.table())


if __name__ == "__main__":
    main()
