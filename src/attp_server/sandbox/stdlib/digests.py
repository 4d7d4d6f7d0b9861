"""The curated `base64`, `hashlib` and `uuid` a program sees.

* ``base64``: the encoders check the size of what they would build (each grows its input by a known
  factor); the decoders shrink, but for ``a85decode``, whose ``z`` stands for four bytes.
* ``hashlib``: fixed-length digests only (md5, sha1, the sha2 and sha3 families, blake2b/blake2s),
  by constructor or ``hashlib.new(name)``. Not the extendable-output ``shake_*`` (their
  ``hexdigest(n)`` builds ``n`` bytes), not ``pbkdf2_hmac``/``scrypt`` (CPU and memory by parameter),
  not ``file_digest`` (files). Hash objects offer ``update``, ``digest``, ``hexdigest``, ``copy``
  and their sizes. The digests are CPython's own (``_sha256``, ...), not OpenSSL's: loading OpenSSL
  would cost every worker about 4 MB; a Python built without them falls back to OpenSSL's. Every
  constructor is called once when the namespace is built, before the worker locks itself down.
* ``uuid``: ``uuid4``, the name-based ``uuid3``/``uuid5`` (written here on those digests: the
  standard ones import ``hashlib`` when first called), ``UUID`` and the ``NAMESPACE_*`` constants.
  Never ``uuid1`` or ``getnode``, which read the host's network address.

Imported by the worker; imports nothing from the rest of ``server`` but ``attp_server.sandbox``.
"""

from __future__ import annotations

import base64 as _base64
import importlib
import uuid as _uuid
from collections.abc import Callable
from typing import Any

from attp_server.sandbox.limits import check_size
from attp_server.sandbox.policy import allow_attributes
from attp_server.sandbox.stdlib.containers import register_copier
from attp_server.sandbox.stdlib.namespaces import Namespace

# ---------------------------------------------------------------- base64

_GROWTH: dict[str, tuple[int, int]] = {
    # encoder: (output bytes, per input bytes), rounded up; line breaks of encodebytes included
    "b64encode": (4, 3),
    "standard_b64encode": (4, 3),
    "urlsafe_b64encode": (4, 3),
    "encodebytes": (78, 57),
    "b32encode": (8, 5),
    "b32hexencode": (8, 5),
    "b16encode": (2, 1),
    "b85encode": (5, 4),
    "a85encode": (5, 4),
}
_DECODERS = (
    "b64decode", "standard_b64decode", "urlsafe_b64decode", "decodebytes", "b32decode", "b32hexdecode", "b16decode",
    "b85decode", "a85decode",
)  # fmt: skip


def _checked_encoder(name: str) -> Callable[..., bytes]:
    encode: Callable[..., bytes] = getattr(_base64, name)
    out, per = _GROWTH[name]

    def encoder(data: Any, *args: Any, **options: Any) -> bytes:
        if isinstance(data, bytes | bytearray):
            # a85encode(wrapcol=1) puts a newline after every character: twice the size at most
            factor = 2 if options.get("wrapcol") or (len(args) > 1 and args[1]) else 1
            check_size(f"base64.{name}()", factor * (len(data) * out // per + out))
        return encode(data, *args, **options)

    encoder.__name__ = name
    return encoder


def _a85decode(data: Any, *args: Any, **options: Any) -> bytes:
    # The one decoder that grows: each 'z' (and 'y' with foldspaces) stands for four bytes.
    if isinstance(data, str):
        check_size("base64.a85decode()", len(data) + 3 * (data.count("z") + data.count("y")))
    elif isinstance(data, bytes | bytearray):
        check_size("base64.a85decode()", len(data) + 3 * (data.count(b"z") + data.count(b"y")))
    return _base64.a85decode(data, *args, **options)


def base64_namespace() -> Namespace:
    members: dict[str, Any] = {name: _checked_encoder(name) for name in _GROWTH}
    members.update({name: getattr(_base64, name) for name in _DECODERS})
    members["a85decode"] = _a85decode
    return Namespace("base64", members)


# ---------------------------------------------------------------- hashlib

ALGORITHMS = (
    "md5", "sha1", "sha224", "sha256", "sha384", "sha512", "sha3_224", "sha3_256", "sha3_384", "sha3_512", "blake2b",
    "blake2s",
)  # fmt: skip


_OWN_MODULE = {
    "md5": "_md5", "sha1": "_sha1", "sha224": "_sha256", "sha256": "_sha256", "sha384": "_sha512", "sha512": "_sha512",
    "sha3_224": "_sha3", "sha3_256": "_sha3", "sha3_384": "_sha3", "sha3_512": "_sha3", "blake2b": "_blake2",
    "blake2s": "_blake2",
}  # fmt: skip
"""Where CPython keeps its own implementation of each algorithm."""


def constructor(name: str) -> Callable[..., Any]:
    """The hash constructor `name`: CPython's own, or OpenSSL's on a build without it."""
    try:
        own: Callable[..., Any] = getattr(importlib.import_module(_OWN_MODULE[name]), name)
    except (ImportError, AttributeError):
        return getattr(importlib.import_module("hashlib"), name)  # type: ignore[no-any-return]
    return own


def _new(name: str, data: Any = b"", **options: Any) -> Any:
    if not isinstance(name, str) or name.lower() not in ALGORITHMS:
        raise ValueError(f"unsupported hash type {name!r}; the algorithms are {', '.join(ALGORITHMS)}")
    return constructor(name.lower())(data, **options)


_HASH_NAMES = ("update", "digest", "hexdigest", "copy", "name", "digest_size", "block_size")


def hashlib_namespace() -> Namespace:
    members: dict[str, Any] = {}
    for name in ALGORITHMS:
        make = constructor(name)
        sample = make(b"preload")  # loads what the algorithm needs while files can still be read
        sample.hexdigest()
        cls = type(sample)
        if cls not in _REGISTERED:
            allow_attributes(cls, _HASH_NAMES)
            register_copier(cls, lambda h: h.copy())
            _REGISTERED.add(cls)
        members[name] = make
    members["new"] = _new
    members["algorithms_guaranteed"] = frozenset(ALGORITHMS)
    members["algorithms_available"] = frozenset(ALGORITHMS)
    return Namespace("hashlib", members)


_REGISTERED: set[type] = set()


# ---------------------------------------------------------------- uuid

allow_attributes(
    _uuid.UUID,
    ("bytes", "bytes_le", "clock_seq", "clock_seq_hi_variant", "clock_seq_low", "fields", "hex", "int", "node",
     "time", "time_hi_version", "time_low", "time_mid", "urn", "variant", "version"),
)  # fmt: skip


def _name_based(algorithm: str, version: int) -> Callable[[_uuid.UUID, str], _uuid.UUID]:
    digest = constructor(algorithm)

    def uuid_from_name(namespace: _uuid.UUID, name: str) -> _uuid.UUID:
        data = namespace.bytes + bytes(name, "utf-8")  # as CPython 3.11 computes it
        return _uuid.UUID(bytes=digest(data, usedforsecurity=False).digest()[:16], version=version)

    uuid_from_name.__name__ = f"uuid{version}"
    return uuid_from_name


def uuid_namespace() -> Namespace:
    return Namespace(
        "uuid",
        {
            "UUID": _uuid.UUID,
            "uuid3": _name_based("md5", 3),
            "uuid4": _uuid.uuid4,
            "uuid5": _name_based("sha1", 5),
            "NAMESPACE_DNS": _uuid.NAMESPACE_DNS,
            "NAMESPACE_URL": _uuid.NAMESPACE_URL,
            "NAMESPACE_OID": _uuid.NAMESPACE_OID,
            "NAMESPACE_X500": _uuid.NAMESPACE_X500,
        },
    )
