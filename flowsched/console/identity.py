"""Internal: who is asking: identities from a users file, the operator token, or a trusted proxy.

* :func:`hash_secret` / :func:`verify_secret`: ``scrypt$n$r$p$salt$hash`` (``hashlib.scrypt``,
  a random 16-byte salt, URL-safe base64 without padding), compared in constant time;
* :func:`read_users_file`: one identity a line, ``name:role:hash`` (role ``viewer`` or
  ``operator``; ``#`` starts a comment; a hash of ``-`` means "only through the proxy");
* :class:`Proxy`: the client's address and the proxy's user header, believed only on
  connections from ``--trusted-proxy`` networks;
* :func:`exposed`: whether a secrets file can be read by its group or by others.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import os
import re
import secrets
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = [
    "ROLES",
    "Identity",
    "Proxy",
    "User",
    "exposed",
    "hash_secret",
    "read_users_file",
    "verify_secret",
]

Role = Literal["viewer", "operator"]
ROLES: tuple[Role, ...] = ("viewer", "operator")
NAME = re.compile(r"^[A-Za-z0-9._@+-]{1,60}$")
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**14, 8, 1
_DUMMY = "scrypt$16384$8$1$AAAAAAAAAAAAAAAAAAAAAA$" + "A" * 43  # for unknown names: same work


@dataclass(frozen=True, slots=True)
class Identity:
    """A signed-in (or proxy-named) person: ``name``, ``role``, and how it was established
    (``"password"``, ``"token"``, ``"proxy"``)."""

    name: str
    role: Role
    via: str

    @property
    def operator(self) -> bool:
        """Whether this identity may act (cancel, run now, requeue, bulk work)."""
        return self.role == "operator"


@dataclass(frozen=True, slots=True)
class User:
    """One line of a users file: the name, its role and its secret's hash (``None``: none)."""

    name: str
    role: Role
    hash: str | None


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def hash_secret(secret: str, *, n: int = SCRYPT_N, r: int = SCRYPT_R, p: int = SCRYPT_P) -> str:
    """``secret``'s slow, salted hash for a users file: ``scrypt$n$r$p$salt$hash``."""
    if not secret:
        raise ValueError("secret: empty (give at least 8 characters)")
    if len(secret) < 8:
        raise ValueError("secret: shorter than 8 characters")
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(secret.encode(), salt=salt, n=n, r=r, p=p, dklen=32)
    return f"scrypt${n}${r}${p}${_b64(salt)}${_b64(digest)}"


def _parse_hash(encoded: str) -> tuple[int, int, int, bytes, bytes]:
    parts = encoded.split("$")
    if len(parts) != 6 or parts[0] != "scrypt":
        raise ValueError("not scrypt$n$r$p$salt$hash")
    n, r, p = (int(x) for x in parts[1:4])
    if not (2 <= n <= 2**20 and n & (n - 1) == 0 and 1 <= r <= 32 and 1 <= p <= 16):
        raise ValueError(f"scrypt parameters n={n} r={r} p={p} out of range")
    salt, digest = _unb64(parts[4]), _unb64(parts[5])
    if len(salt) < 8 or len(digest) < 16:
        raise ValueError("salt or hash too short")
    return n, r, p, salt, digest


def verify_secret(secret: str, encoded: str) -> bool:
    """Whether ``secret`` matches ``encoded`` (from :func:`hash_secret`), in constant time."""
    try:
        n, r, p, salt, digest = _parse_hash(encoded)
    except (ValueError, TypeError):
        return False
    given = hashlib.scrypt(
        secret.encode("utf-8", "replace"), salt=salt, n=n, r=r, p=p, dklen=len(digest),
        maxmem=256 * 1024 * 1024,
    )  # fmt: skip
    return hmac.compare_digest(given, digest)


def burn(secret: str) -> None:
    """The work of one :func:`verify_secret` (an unknown name costs what a known one does)."""
    verify_secret(secret, _DUMMY)


def read_users_file(path: str | Path) -> dict[str, User]:
    """The identities in ``path``; ``ValueError`` naming the file, line and what is wrong."""
    users: dict[str, User] = {}
    text = Path(path).read_text(encoding="utf-8")
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"users file {str(path)!r} line {number}"
        parts = line.split(":", 2)
        if len(parts) != 3:
            raise ValueError(f"{where}: expected name:role:hash")
        name, role, hashed = parts
        if not NAME.match(name):
            raise ValueError(f"{where}: name {name[:40]!r} (letters, digits, . _ @ + -; ≤ 60)")
        if role not in ROLES:
            raise ValueError(f"{where}: role {role[:20]!r} is not viewer or operator")
        if hashed != "-":
            try:
                _parse_hash(hashed)
            except ValueError as exc:
                raise ValueError(
                    f"{where}: hash ({exc}; make one with flowsched console hash-secret)"
                ) from None
        if name in users:
            raise ValueError(f"{where}: {name!r} given twice")
        users[name] = User(name, role, None if hashed == "-" else hashed)
    if not users:
        raise ValueError(f"users file {str(path)!r}: no identity in it")
    return users


def exposed(path: str | Path) -> bool:
    """Whether ``path`` can be read by its group or by others (a secret should not be)."""
    if os.name != "posix":
        return False
    mode = Path(path).stat().st_mode
    return bool(mode & (stat.S_IRGRP | stat.S_IROTH))


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def networks(cidrs: Iterable[str]) -> tuple[Network, ...]:
    """The ``--trusted-proxy`` values as networks; ``ValueError`` naming a bad one."""
    found = []
    for cidr in cidrs:
        try:
            found.append(ipaddress.ip_network(cidr.strip(), strict=False))
        except ValueError:
            raise ValueError(f"--trusted-proxy {cidr!r} is not an address or CIDR") from None
    return tuple(found)


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip().strip("[]"))
    except ValueError:
        return None


class Proxy:
    """What a request's connection and headers say about its client and its user.

    ``X-Forwarded-For`` and ``user_header`` are believed only when the connection comes from
    one of ``trusted`` (the proxy's addresses); from anywhere else they are ignored."""

    def __init__(self, trusted: Sequence[str] = (), user_header: str | None = None) -> None:
        self.trusted = networks(trusted)
        self.user_header = user_header.lower() if user_header else None
        if self.user_header and not self.trusted:
            raise ValueError("--user-header needs --trusted-proxy (whose header to believe)")

    def is_trusted(self, host: str | None) -> bool:
        """Whether a connection from ``host`` is one of the trusted proxies."""
        address = _address(host) if host else None
        return address is not None and any(address in net for net in self.trusted)

    def client(self, host: str | None, headers: Mapping[str, str]) -> str:
        """The client's address: the connection's, or through trusted proxies the nearest
        ``X-Forwarded-For`` address that is no trusted proxy."""
        peer = host or "unknown"
        if not self.is_trusted(host):
            return peer
        chain = [part.strip() for part in headers.get("x-forwarded-for", "").split(",")]
        for hop in reversed([part for part in chain if part]):
            if _address(hop) is None:
                return peer  # a malformed chain: the proxy's own address, nothing invented
            if not self.is_trusted(hop):
                return hop[:64]
        return peer

    def user(self, host: str | None, headers: Mapping[str, str]) -> str | None:
        """The user name the trusted proxy sent, or ``None`` (none sent, or not a proxy)."""
        if self.user_header is None or not self.is_trusted(host):
            return None
        name = headers.get(self.user_header, "").strip()
        return name if NAME.match(name) else None
