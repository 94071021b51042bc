"""Pre-flight checks of a deployment: reasons the backend must refuse to start.

``check_deployment(settings, config_path)`` is static: it looks at file modes and the
configuration, never at the network. ``dealer run`` prints every reason and exits with
status 2 (an invalid configuration: systemd's ``RestartPreventExitStatus=2`` stops the
restart loop). The rules:

* the config file may not be writable by group or others (anyone who can edit it can
  point the backend at another broker or change the pay tables);
* a password written in the config file requires the file not to be readable by others
  (better: use ``[mqtt].password_file`` or ``DEALER_MQTT__PASSWORD``);
* secrets (``password_file``, the TLS ``key_file``, scanner HMAC key files, supervisor
  signing key files) must be readable by the backend and by nobody else: no group or
  other permission bits; and no key file may belong to two scanners or supervisors (a
  shared key cannot tell who signed);
* every TLS file named must exist and be readable, and TLS files only make sense with
  ``mqtts://``;
* a broker is required: without ``[mqtt].url`` the backend would publish on an in-process
  bus nobody outside the process can reach, so that takes ``[mqtt].in_process = true``;
* plain ``mqtt://`` is allowed only to a loopback address, unless
  ``[mqtt].allow_insecure = true``;
* a scanner with HMAC keys must sign every frame: ``require_mac = false`` next to
  ``hmac_key_files`` is refused (unsigned frames would pass, so the keys would protect
  nothing), and so is ``require_mac = true`` without keys (every frame would be refused).
"""

from __future__ import annotations

import ipaddress
import stat
import tomllib
from pathlib import Path

from dealer.edge.config import Settings

#: Why ``dealer run`` refuses a config without a broker URL, and how to ask for the in-process bus.
NO_BROKER = ("mqtt.url is not set: no station, scanner gateway or settlement could reach this backend. "
             "Set [mqtt] url = \"mqtt://host:port\" (or DEALER_MQTT__URL), or ask for the in-process bus "
             "explicitly (demos and tests only) with [mqtt] in_process = true")

_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}


def is_loopback_host(host: str) -> bool:
    """True for ``localhost`` and loopback IP literals (127.0.0.0/8, ::1). No DNS lookup."""
    h = host.strip("[]").lower()
    if h in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _unreadable(path: Path) -> str | None:
    """Why ``path`` cannot be read as a file, or None when it can."""
    try:
        with path.open("rb") as f:
            f.read(1)
    except FileNotFoundError:
        return "does not exist"
    except IsADirectoryError:
        return "is a directory"
    except PermissionError:
        return "is not readable by this user (permission denied)"
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    return None


def _check_secret(path: Path, what: str) -> list[str]:
    """A secret file: readable by us, and no permission bits for group or others."""
    why = _unreadable(path)
    if why is not None:
        return [f"{what} {path} {why}"]
    mode = _mode(path)
    if mode & 0o077:
        return [f"{what} {path} is accessible by group or others (mode {mode:04o}): "
                f"it must be private to the backend's user (chmod 600 {path})"]
    return []


def _check_readable(path: Path, what: str) -> list[str]:
    why = _unreadable(path)
    return [f"{what} {path} {why}"] if why is not None else []


def _password_in_file(config_path: Path) -> bool:
    """Does the TOML file itself hold ``[mqtt].password``? (An env override does not count.)"""
    try:
        data = tomllib.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    mqtt = data.get("mqtt")
    return isinstance(mqtt, dict) and mqtt.get("password") not in (None, "")


def check_deployment(settings: Settings, config_path: str | Path | None) -> list[str]:
    """Every reason the backend must refuse to start with ``settings`` loaded from
    ``config_path`` (None: no file, environment only); ``[]`` when it may start."""
    from drivers.mqtt import parse_broker_url

    problems: list[str] = []
    m = settings.mqtt

    # --- the configuration file ---
    if config_path is not None:
        cfg = Path(config_path)
        why = _unreadable(cfg)
        if why is not None:
            problems.append(f"config file {cfg} {why}")
        else:
            mode = _mode(cfg)
            if mode & (stat.S_IWGRP | stat.S_IWOTH):
                problems.append(f"config file {cfg} is writable by group or others (mode {mode:04o}): "
                                f"anyone who can edit it controls the backend (chmod go-w {cfg})")
            if _password_in_file(cfg) and mode & stat.S_IROTH:
                problems.append(f"config file {cfg} holds mqtt.password and is readable by others "
                                f"(mode {mode:04o}): chmod o-r {cfg}, or move the password to "
                                "mqtt.password_file or DEALER_MQTT__PASSWORD")

    # --- the broker connection ---
    if m.password is not None and m.password_file is not None:
        problems.append("both mqtt.password and mqtt.password_file are set: keep only one")
    if m.password_file is not None:
        problems += _check_secret(m.password_file, "mqtt.password_file")
    tls_files = {"mqtt.ca_file": m.ca_file, "mqtt.cert_file": m.cert_file, "mqtt.key_file": m.key_file}
    if m.url is None and not m.in_process:
        problems.append(NO_BROKER)
    if m.url is None:
        named = [k for k, v in tls_files.items() if v is not None]
        if named:
            problems.append(f"{', '.join(named)} set but mqtt.url is not: the backend would not use a broker")
    else:
        several = len(m.urls) > 1
        endpoints = []
        for i, url in enumerate(m.urls):
            key = f"mqtt.broker_urls item {i + 1}" if several else "mqtt.url"
            try:
                endpoints.append((key, url, *parse_broker_url(url)))
            except ValueError as exc:
                problems.append(f"{key}: {exc}")
        if endpoints and any(tls for *_, tls in endpoints):
            if m.ca_file is not None:
                problems += _check_readable(m.ca_file, "mqtt.ca_file")
            if m.cert_file is not None:
                problems += _check_readable(m.cert_file, "mqtt.cert_file")
            if m.key_file is not None:
                if m.cert_file is None:
                    problems.append("mqtt.key_file is set without mqtt.cert_file (the client certificate)")
                problems += _check_secret(m.key_file, "mqtt.key_file")
        elif endpoints:
            named = [k for k, v in tls_files.items() if v is not None]
            if named:
                what = f"mqtt.url {m.url} is" if not several else "every one of mqtt.broker_urls is"
                problems.append(f"{', '.join(named)} set but {what} plain MQTT: use mqtts:// for TLS")
        for key, url, host, _port, tls in endpoints:
            if not tls and not is_loopback_host(host) and not m.allow_insecure:
                problems.append(f"{key} {url} is plain MQTT (no TLS) to {host}, which is not a "
                                "loopback address: passwords and every message would cross the network "
                                "in clear text. Use mqtts:// (with mqtt.ca_file), or set "
                                "mqtt.allow_insecure = true to accept that")

    # --- the PostgreSQL journal ---
    if settings.service.journal_url is not None:
        problems += check_journal_url(settings.service.journal_url, allow_insecure=m.allow_insecure)

    # --- scanner HMAC keys and supervisor signing keys ---
    owners: dict[Path, list[str]] = {}
    for tc in settings.tables:
        sc = tc.scanner
        for key_file in sc.hmac_key_files:
            problems += _check_secret(Path(key_file), f"table {tc.id} scanner {sc.reader_id} HMAC key file")
            owners.setdefault(Path(key_file), []).append(f"scanner {sc.reader_id}")
        if sc.hmac_key_files and sc.require_mac is False:
            problems.append(f"table {tc.id} scanner {sc.reader_id}: require_mac = false although hmac_key_files is "
                            "set: a reader with keys must sign every frame, otherwise anyone who can write its line "
                            "or topic sends unsigned frames and the keys protect nothing. Remove require_mac (keys "
                            "imply it) or set it to true")
        elif not sc.hmac_key_files and sc.require_mac:
            problems.append(f"table {tc.id} scanner {sc.reader_id}: require_mac = true without hmac_key_files: "
                            "every frame of the reader would be refused; add its key files")
    for sup in settings.security.supervisors:
        for key_file in sup.key_files:
            problems += _check_secret(Path(key_file), f"supervisor {sup.id} key file")
            owners.setdefault(Path(key_file), []).append(f"supervisor {sup.id}")
    for path, who in owners.items():
        if len(set(who)) > 1:  # a shared key cannot tell its holders apart
            problems.append(f"key file {path} is shared by {' and '.join(sorted(set(who)))}: "
                            "every scanner and every supervisor needs its own key")
    return problems


def check_journal_url(url: str, *, allow_insecure: bool = False) -> list[str]:
    """Why a ``service.journal_url`` must not be used: not a PostgreSQL URL, a password inside
    it (config files and process listings are read by more people than the database's
    password file: use PGPASSFILE, or a client certificate), or a server that is not on
    loopback without ``sslmode=verify-full`` (or ``verify-ca``): the journal, results and
    command ids would cross the network in clear text to a server nobody verified."""
    from urllib.parse import parse_qs, urlsplit

    try:
        u = urlsplit(url)
        host = u.hostname or ""
        u.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as exc:
        return [f"service.journal_url is not a valid URL: {exc}"]
    if u.scheme not in ("postgresql", "postgres"):
        return [f"service.journal_url must start with postgresql:// (got {u.scheme or 'no scheme'}://...)"]
    problems = []
    query = parse_qs(u.query)
    if u.password or "password" in query:
        problems.append("service.journal_url holds a password: anyone who reads the config or the process "
                        "list has it; put it in the libpq password file (PGPASSFILE, mode 0600) or use a "
                        "client certificate (sslcert/sslkey)")
    sslmode = (query.get("sslmode") or [""])[-1]
    local = host == "" or host.startswith("/") or is_loopback_host(host)
    if not local and sslmode not in ("verify-full", "verify-ca") and not allow_insecure:
        problems.append(f"service.journal_url connects to {host}, which is not a loopback address, without "
                        "sslmode=verify-full: the journal would cross the network unverified. Add "
                        "?sslmode=verify-full&sslrootcert=/etc/dealer/pg-ca.pem (or set mqtt.allow_insecure = true "
                        "to accept the risk on a closed network)")
    return problems


def refusal_message(problems: list[str]) -> str:
    """What ``dealer run`` prints on stderr before exiting with status 2: one line for one
    reason, a list for several."""
    if len(problems) == 1:
        return f"dealer: refusing to start: {problems[0]}"
    return "dealer: refusing to start:\n" + "\n".join(f"  - {p}" for p in problems)


__all__ = ["NO_BROKER", "check_deployment", "check_journal_url", "is_loopback_host", "refusal_message"]
