"""Password hashes: Argon2id through argon2-cffi (its PasswordHasher's
defaults: a random salt, memory-hard, slow on purpose).

argon2-cffi comes with the ``standalone`` extra; a host app that mounts the
blueprint never imports this module.
"""

from __future__ import annotations

try:
    from argon2 import PasswordHasher
    from argon2.exceptions import InvalidHashError, VerificationError
except ImportError:  # pragma: no cover - the extra is missing
    PasswordHasher = None  # type: ignore[assignment,misc]  # no argon2-cffi: MISSING says so when asked

MISSING = "sign-in needs argon2-cffi: pip install -e '.[standalone]' in the pgbus-web checkout"


class HashingUnavailable(RuntimeError):
    pass


def _hasher() -> PasswordHasher:
    if PasswordHasher is None:
        raise HashingUnavailable(MISSING)
    return PasswordHasher()


def hash_password(password: str, hasher: PasswordHasher | None = None) -> str:
    """A salted Argon2id hash of *password* (the PHC string)."""
    return (hasher or _hasher()).hash(password)


def verify(stored: str, password: str) -> bool:
    """True when *password* matches *stored*. The parameters come from the
    hash itself, so a hash made with other costs still verifies."""
    try:
        return _hasher().verify(stored, password)
    except (VerificationError, InvalidHashError):
        return False


# Checked against when the user is unknown, so that an unknown name takes
# as long to refuse as a wrong password (made on first use).
_decoy: str | None = None


def burn(password: str) -> None:
    """Spend the time a verify takes, for a name that has no hash."""
    global _decoy
    if _decoy is None:
        _decoy = hash_password("pgbus-web decoy")
    verify(_decoy, password)
