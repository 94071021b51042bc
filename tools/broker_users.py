"""``dealer deploy users``: the broker provisioned in one step from a config.

For every user the ACL names (:func:`tools.deploy.users_of`: the backend, settlement, the player
platform, one scanner gateway per MQTT-scanner table, one station per table, one login per
supervisor, ops, the auditor and, for a test bench, the rig) it keeps or makes a password in
``DIR/secrets/USER.pw`` (mode 0600, one line: what each client's ``--password-file`` or
``mqtt.password_file`` names), and writes ``DIR/passwd`` (Mosquitto's password file:
PBKDF2-SHA512, the ``$7$`` format ``mosquitto_passwd`` writes) and ``DIR/acl``. Re-running after
a table is added keeps every existing password and makes the new user's; ``--rotate`` makes all
of them new. The broker loads the two files with ``password_file`` and ``acl_file``
(deploy/mosquitto/mosquitto.conf) and takes changes on SIGHUP.
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
from pathlib import Path

from dealer.edge.config import Settings

#: Mosquitto 2's password hash: PBKDF2-HMAC-SHA512, 101 iterations, a 12-byte salt (its defaults).
ITERATIONS, SALT_BYTES = 101, 12


class ProvisionError(Exception):
    """The directory cannot be written, or a secret file is not one of ours: one line."""


def mosquitto_hash(password: str, salt: bytes | None = None, iterations: int = ITERATIONS) -> str:
    """The password-file entry's hash of ``password`` (``$7$ITER$SALT$HASH``, base64)."""
    salt = salt if salt is not None else secrets.token_bytes(SALT_BYTES)
    digest = hashlib.pbkdf2_hmac("sha512", password.encode("utf-8"), salt, iterations)
    return f"$7${iterations}${base64.b64encode(salt).decode()}${base64.b64encode(digest).decode()}"


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by its owner only, whatever the umask (replace atomically)."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(text)
    os.replace(tmp, path)


def _password(secret: Path, rotate: bool) -> tuple[str, bool]:
    """(the user's password, made now?)"""
    if secret.exists() and not rotate:
        text = secret.read_text(encoding="utf-8").rstrip("\r\n")
        if not text or "\n" in text or ":" in text:
            raise ProvisionError(f"{secret} does not hold one password on one line: remove it or use --rotate")
        return text, False
    password = secrets.token_urlsafe(24)
    _write_private(secret, password + "\n")
    return password, True


def provision(settings: Settings, out: str | Path, *, rig: bool = False, rotate: bool = False,
              source: str | None = None) -> str:
    """Write ``out``/passwd, ``out``/acl and ``out``/secrets/USER.pw; return a summary for people."""
    from tools.deploy import render_acl, users_of

    root = Path(out)
    secrets_dir = root / "secrets"
    try:
        secrets_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(secrets_dir, 0o700)
        made: list[str] = []
        lines: list[str] = []
        for user in users_of(settings, rig=rig):
            password, new = _password(secrets_dir / f"{user}.pw", rotate)
            if new:
                made.append(user)
            lines.append(f"{user}:{mosquitto_hash(password)}")
        _write_private(root / "passwd", "\n".join(lines) + "\n")
        acl = root / "acl"
        acl.write_text(render_acl(settings, source=source, rig=rig), encoding="utf-8")
        os.chmod(acl, 0o644)
    except OSError as exc:
        raise ProvisionError(f"cannot write {root}: {exc.strerror or exc}") from None
    kept = len(lines) - len(made)
    return "\n".join([
        f"{root / 'passwd'}: {len(lines)} users (Mosquitto password_file, mode 0600: the broker's user must read it)",
        f"{root / 'acl'}: the ACL for them (acl_file)",
        f"{secrets_dir}/USER.pw: each role's password for its client's --password-file or mqtt.password_file "
        f"({len(made)} new{', ' + str(kept) + ' kept' if kept else ''}); hand each to its role only",
        "users: " + ", ".join(line.split(":", 1)[0] for line in lines),
        "then: reload the broker (SIGHUP) so it reads both files",
    ])


__all__ = ["ProvisionError", "mosquitto_hash", "provision"]
