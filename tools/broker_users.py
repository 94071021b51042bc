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

``--broker rabbitmq`` writes ``DIR/definitions.json`` instead (the users with RabbitMQ's
salted SHA-256 password hashes, their permissions and topic permissions: ``rabbitmqctl
import_definitions DIR/definitions.json``); ``--broker nats`` writes ``DIR/nats-passwords.conf``
(each user's bcrypt hash as a config variable, mode 0600) and ``DIR/nats-authorization.conf``
(tools/broker_acls.py), which nats.conf includes in that order.
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
import warnings
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


def rabbitmq_hash(password: str, salt: bytes | None = None) -> str:
    """RabbitMQ's stored form (rabbit_password_hashing_sha256): base64 of a 4-byte salt and
    SHA-256(salt + password)."""
    salt = salt if salt is not None else secrets.token_bytes(4)
    return base64.b64encode(salt + hashlib.sha256(salt + password.encode("utf-8")).digest()).decode()


_BCRYPT64 = "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def bcrypt_hash(password: str, cost: int = 11) -> str:
    """A ``$2a$`` bcrypt hash, the form nats-server 2.9 recognises (its prefix check is ``$2a$``),
    from the C library's crypt(3) (libxcrypt on Debian)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # crypt: in the standard library until 3.13
        import crypt
    salt = "".join(secrets.choice(_BCRYPT64) for _ in range(21)) + secrets.choice(".Oeu")  # 128 bits, canonical
    out = crypt.crypt(password, f"$2a${cost:02d}${salt}")
    if not out or not out.startswith("$2a$"):
        raise ProvisionError("this system's crypt(3) cannot make bcrypt hashes (libxcrypt is needed)")
    return out


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
              source: str | None = None, broker: str = "mosquitto", vhost: str = "/") -> str:
    """Write ``out``/secrets/USER.pw and the broker's files (Mosquitto: passwd and acl;
    RabbitMQ: definitions.json; NATS: nats-passwords.conf and nats-authorization.conf); return a
    summary for people."""
    from tools.mosquitto_acl import render_acl, users_of

    if broker != "mosquitto":
        return _provision_other(settings, Path(out), broker, rig=rig, rotate=rotate, source=source, vhost=vhost)

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


def _passwords(settings: Settings, secrets_dir: Path, *, rig: bool, rotate: bool) -> tuple[dict[str, str], list[str]]:
    from tools.mosquitto_acl import users_of

    secrets_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(secrets_dir, 0o700)
    passwords: dict[str, str] = {}
    made: list[str] = []
    for user in users_of(settings, rig=rig):
        passwords[user], new = _password(secrets_dir / f"{user}.pw", rotate)
        if new:
            made.append(user)
    return passwords, made


def _provision_other(settings: Settings, root: Path, broker: str, *, rig: bool, rotate: bool, source: str | None,
                     vhost: str) -> str:
    """RabbitMQ's definitions, or NATS's passwords and authorization, with the secrets."""
    from tools.broker_acls import nats_password_variable, render_nats, render_rabbitmq

    secrets_dir = root / "secrets"
    try:
        passwords, made = _passwords(settings, secrets_dir, rig=rig, rotate=rotate)
        if broker == "rabbitmq":
            text = render_rabbitmq(settings, vhost=vhost, rig=rig,
                                   password_hashes={u: rabbitmq_hash(p) for u, p in passwords.items()})
            _write_private(root / "definitions.json", text)
            files = [f"{root / 'definitions.json'}: {len(passwords)} users with their permissions and topic "
                     f"permissions on vhost {vhost!r} (mode 0600)",
                     f"then: rabbitmqctl import_definitions {root / 'definitions.json'}"]
        elif broker == "nats":
            lines = [f"# nats-server password hashes (bcrypt) for nats-authorization.conf, rendered by dealer deploy "
                     f"users{': ' + source if source else ''}; include this file first"]
            lines += [f'{nats_password_variable(u)}: "{bcrypt_hash(p)}"' for u, p in passwords.items()]
            _write_private(root / "nats-passwords.conf", "\n".join(lines) + "\n")
            auth = root / "nats-authorization.conf"
            auth.write_text(render_nats(settings, rig=rig, source=source), encoding="utf-8")
            os.chmod(auth, 0o644)
            files = [f"{root / 'nats-passwords.conf'}: {len(passwords)} bcrypt hashes as config variables (mode 0600)",
                     f"{auth}: the authorization block that uses them",
                     "then: include both in nats.conf (passwords first) and run nats-server --signal reload"]
        else:
            raise ProvisionError(f"unknown broker {broker!r}")
    except OSError as exc:
        raise ProvisionError(f"cannot write {root}: {exc.strerror or exc}") from None
    kept = len(passwords) - len(made)
    return "\n".join([
        *files,
        f"{secrets_dir}/USER.pw: each role's password for its client's --password-file or mqtt.password_file "
        f"({len(made)} new{', ' + str(kept) + ' kept' if kept else ''}); hand each to its role only",
        "users: " + ", ".join(passwords),
    ])


__all__ = ["ProvisionError", "bcrypt_hash", "mosquitto_hash", "provision", "rabbitmq_hash"]
