"""A private Mosquitto running the studio's production configuration (tests).

The configuration is ``deploy/mosquitto/mosquitto.conf`` itself, with only what must
differ on a test machine substituted: the two listeners' ports (free loopback ports), the
paths of the certificates, the password file, the ACL and the persistence directory, and
the log destination (a file instead of syslog). Every other line (TLS version, anonymous
access, per-listener settings, limits) is the deployed one, so the tests exercise what a
studio host runs. A directive the substitution expects but cannot find is an error: the
deployed file and this harness must not drift apart silently.

Mosquitto started as root drops privileges to the ``mosquitto`` user before it reads the
password file, the ACL and the TLS key; under root (CI containers) the test broker keeps
running as root (``user root``) so that it can read them in the test's private folder.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from simulators.broker import free_port, start_mosquitto, stop_mosquitto

ROOT = Path(__file__).resolve().parent.parent
DEPLOY_CONF = ROOT / "deploy" / "mosquitto" / "mosquitto.conf"
MAKE_TEST_CA = ROOT / "deploy" / "tls" / "make-test-ca.sh"
MOSQUITTO_PASSWD = shutil.which("mosquitto_passwd") or "/usr/bin/mosquitto_passwd"


def make_test_ca(out: Path, *clients: str) -> Path:
    """Run ``deploy/tls/make-test-ca.sh OUT [CLIENT ...]``; returns ``out``."""
    proc = subprocess.run(["bash", str(MAKE_TEST_CA), str(out), *clients], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"make-test-ca.sh failed ({proc.returncode}): {proc.stderr}")
    return out


def write_password_file(path: Path, users: Mapping[str, str]) -> Path:
    """A Mosquitto password file (hashed, via ``mosquitto_passwd -b``) for ``users``."""
    if not Path(MOSQUITTO_PASSWD).exists():
        raise RuntimeError("mosquitto_passwd is not installed (Debian package 'mosquitto'); scripts/test installs it")
    path.unlink(missing_ok=True)
    for i, (user, password) in enumerate(users.items()):
        args = [MOSQUITTO_PASSWD, "-b"] + (["-c"] if i == 0 else []) + [str(path), user, password]
        proc = subprocess.run(args, capture_output=True, text=True, timeout=30)
        if proc.returncode != 0:
            raise RuntimeError(f"mosquitto_passwd failed for {user}: {proc.stderr or proc.stdout}")
    path.chmod(0o600)
    return path


def derive_config(deploy_conf: str, *, tls_port: int, plain_port: int, certs: Path, password_file: Path,
                  acl_file: Path, workdir: Path) -> str:
    """The deployed configuration with ports and paths substituted (see the module doc)."""
    subs: list[tuple[str, str, str]] = [  # (directive regex, replacement, what)
        (r"listener 8883(\s.*)?", f"listener {tls_port} 127.0.0.1", "the TLS listener on 8883"),
        (r"listener 1883 127\.0\.0\.1", f"listener {plain_port} 127.0.0.1", "the loopback listener"),
        (r"cafile \S+/ca\.crt", f"cafile {certs / 'ca.crt'}", "cafile"),
        (r"certfile \S+/broker\.crt", f"certfile {certs / 'broker.crt'}", "certfile"),
        (r"keyfile \S+/broker\.key", f"keyfile {certs / 'broker.key'}", "keyfile"),
        (r"password_file \S+", f"password_file {password_file}", "password_file"),
        (r"acl_file \S+", f"acl_file {acl_file}", "acl_file"),
        (r"persistence_location \S+", f"persistence_location {workdir}/", "persistence_location"),
        (r"log_dest syslog", f"log_dest file {workdir / 'mosquitto.log'}", "log_dest"),
    ]
    seen: set[str] = set()
    out: list[str] = []
    for line in deploy_conf.splitlines():
        stripped = line.strip()
        for pattern, replacement, what in subs:
            if re.fullmatch(pattern, stripped):
                if what in seen:
                    raise ValueError(f"{DEPLOY_CONF}: {what} appears twice")
                seen.add(what)
                line = replacement
                break
        out.append(line)
    missing = [what for _, _, what in subs if what not in seen]
    if missing:
        raise ValueError(f"{DEPLOY_CONF} no longer has {', '.join(missing)}: update simulators/secure_broker.py")
    if os.geteuid() == 0:
        out.append("# test harness: running as root, keep root (the mosquitto user cannot read the test's folder)")
        out.append("user root")
    return "\n".join(out) + "\n"


class SecureMosquitto:
    """Mosquitto with the deployed configuration: TLS on ``tls_port``, the plain loopback
    listener on ``plain_port``, passwords for ``users`` and the ACL text ``acl``."""

    def __init__(self, workdir: Path, certs: Path, users: Mapping[str, str], acl: str, *, tied: bool = False) -> None:
        self.tied = tied  # the broker dies with this process, in its own process group (start_mosquitto)
        self.dir = workdir
        self.certs = certs
        self.tls_port = free_port()
        self.plain_port = free_port()
        self.tls_url = f"mqtts://127.0.0.1:{self.tls_port}"
        self.plain_url = f"mqtt://127.0.0.1:{self.plain_port}"
        self.ca_file = certs / "ca.crt"
        self.password_file = write_password_file(workdir / "passwd", users)
        self.acl_file = workdir / "acl"
        self.acl_file.write_text(acl)
        self.acl_file.chmod(0o600)
        self.conf = workdir / "mosquitto.conf"
        self.conf.write_text(derive_config(DEPLOY_CONF.read_text(), tls_port=self.tls_port, plain_port=self.plain_port,
                                           certs=certs, password_file=self.password_file, acl_file=self.acl_file,
                                           workdir=workdir))
        self.proc: subprocess.Popen[bytes] | None = None

    def log(self) -> str:
        p = self.dir / "mosquitto.log"
        return p.read_text(errors="replace") if p.exists() else ""

    def start(self) -> None:
        assert self.proc is None
        self.proc = start_mosquitto(self.conf, [self.tls_port, self.plain_port], self.log, tied=self.tied)

    def stop(self) -> None:
        if self.proc is not None:
            stop_mosquitto(self.proc)
            self.proc = None
