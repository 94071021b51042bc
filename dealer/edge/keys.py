"""HMAC key files at the edge: hex text in, bytes out, one clear error line naming the file.

One reader for every key the backend holds (scanner frame keys, supervisor signing keys)
so that a missing, unreadable, non-hex or too short key stops start-up with the same kind
of message wherever it is configured. The pure verifiers (``drivers.frames``,
``dealer.edge.signing``) never see a path.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from drivers.frames import MIN_KEY_LEN

if TYPE_CHECKING:
    from dealer.edge.config import SecuritySection
    from dealer.edge.signing import SupervisorVerifier

MAX_KEY_FILE = 4096  # bytes: a key file is one line of hex; anything larger is the wrong file


def read_hex_key(path: Path, what: str) -> bytes:
    """The key in ``path``: hex digits (whitespace around or between bytes allowed, case
    ignored), at least ``MIN_KEY_LEN`` bytes. ``what`` names the key in the error, e.g.
    ``"scanner SC1: HMAC key file"``; every ValueError reads ``"{what} {path} ..."``."""
    where = f"{what} {path}"
    try:
        with Path(path).open("rb") as f:
            raw = f.read(MAX_KEY_FILE + 1)
    except FileNotFoundError:
        raise ValueError(f"{where} cannot be read: it does not exist") from None
    except IsADirectoryError:
        raise ValueError(f"{where} cannot be read: it is a directory") from None
    except PermissionError:
        raise ValueError(f"{where} cannot be read: permission denied for this user") from None
    except OSError as exc:
        raise ValueError(f"{where} cannot be read: {exc.strerror or exc}") from None
    if len(raw) > MAX_KEY_FILE:
        raise ValueError(f"{where} is larger than {MAX_KEY_FILE} bytes: not a key file")
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        raise ValueError(f"{where} cannot be read as hex text: it holds non-ASCII bytes") from None
    try:
        key = bytes.fromhex(text.strip())
    except ValueError:
        raise ValueError(f"{where} must hold the key as hex digits (e.g. 'openssl rand -hex 32')") from None
    if len(key) < MIN_KEY_LEN:
        raise ValueError(f"{where} holds a {len(key)}-byte key; at least {MIN_KEY_LEN} bytes are needed "
                         "(32 random bytes are recommended)")
    return key


def read_hex_keys(paths: Iterable[Path], what: str) -> list[bytes]:
    return [read_hex_key(p, what) for p in paths]


def supervisor_verifier(security: SecuritySection) -> SupervisorVerifier:
    """The verifier for ``[security]``: every supervisor's key files read now (ValueError
    naming the file otherwise). With no supervisors configured, every command is refused
    as ``unknown_supervisor``."""
    from dealer.edge.signing import SupervisorVerifier

    return SupervisorVerifier(
        {s.id: (read_hex_keys(s.key_files, f"supervisor {s.id}: key file"), s.tables or None)
         for s in security.supervisors},
        max_age_ms=security.max_age_ms, max_skew_ms=security.max_skew_ms)


__all__ = ["MAX_KEY_FILE", "read_hex_key", "read_hex_keys", "supervisor_verifier"]
