"""``dealer cluster``: set up a multi-node studio's database, see its nodes and table leases, move a table.

``init`` bootstraps the shared PostgreSQL journal as a superuser (or a role with CREATEROLE and
CREATEDB), idempotently: the owner role, the database, the journal schema (what ``python -m
dealer.edge.journals init`` creates), the group roles and grants of deploy/postgresql/roles.sql
(:data:`ROLES_SQL`), one login role per node (member of ``dealer_node``) and the auditors' and
operators' logins. Each login's password is written, never printed, to ``OUT/NAME.pgpass`` (the
line of the libpq password file the host installs), kept on a second run unless ``--rotate``; each
node's ``OUT/NODE.env`` holds its node id and journal URL (``DEALER_SERVICE__JOURNAL_URL``) for
/etc/dealer/node.env. deploy/cluster/README.md is the whole procedure.

``status`` shows every node (live or not, by its heartbeat on the database's clock) and every
table lease (holder, epoch, time left, pin). A node is DOWN once it has been silent for a lease
(``[cluster].lease_seconds`` of ``--config``, ``--lease-seconds``, or what the held leases show),
or once it holds nothing, has missed a renewal and other nodes took tables after its last
heartbeat. ``move TABLE --to NODE`` pins a table to a node: placement puts it there while that
node is live (above the configured ``preferred_nodes``), and the current owner hands it over
between rounds (docs/cluster.md). ``unpin TABLE`` gives the table back to placement. Each act is
recorded, append-only, in ``cluster_log`` with the operator's database role and OS user. The
journal URL comes from ``--journal`` or the config's ``service.journal_url``; the database role
needs the rights of ``dealer_operator`` (deploy/postgresql/roles.sql).
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import re
import secrets
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from dealer.cli.args import CONFIG_HELP, fail, int_range, seconds

_ID = re.compile(r"^[A-Za-z0-9_.:\-]{1,64}$")


def _connect(url: str) -> Any:
    import psycopg

    from dealer.edge.journal_urls import redact

    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=5)
    except psycopg.Error as exc:
        raise ValueError(f"cannot reach the journal database {redact(url)}: "
                         f"{' '.join(str(exc).split()) or type(exc).__name__}") from None


def _settings(args: argparse.Namespace) -> Any:
    from dealer.edge.config import ConfigError, load_settings

    try:
        return load_settings(args.config)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None


def _url(args: argparse.Namespace) -> str:
    if args.journal:
        return str(args.journal)
    if args.config:
        settings = _settings(args)
        if settings.service.journal_url:
            return str(settings.service.journal_url)
        raise ValueError(f"{args.config} has no service.journal_url: leases exist only with a PostgreSQL journal")
    raise ValueError("give --journal postgresql://... or --config FILE")


#: The lease when neither the configuration, the option nor a held lease says it: [cluster]'s default.
DEFAULT_LEASE_SECONDS = 4.0

# Every node with: its silence (database clock), whether a node other than it took a lease after
# its last heartbeat, and the longest time its own held leases run past that heartbeat (a node
# renews its heartbeat and its leases in one statement: that is the lease, or a little more for a
# lease taken since).
_NODES_SQL = """
SELECT n.node, n.session, n.leaving, EXTRACT(EPOCH FROM clock_timestamp() - n.heartbeat_at)::float8, n.started_at,
       EXISTS (SELECT 1 FROM leases l WHERE l.node IS NOT NULL AND l.node <> n.node AND l.acquired_at > n.heartbeat_at),
       (SELECT max(EXTRACT(EPOCH FROM l.expires_at - n.heartbeat_at))::float8 FROM leases l
        WHERE l.node = n.node AND l.expires_at > clock_timestamp())
FROM nodes n ORDER BY n.node
"""


def status(url: str, lease_seconds: float | None = None, renew_seconds: float | None = None,
           lease_source: str = "option") -> dict[str, Any]:
    """Nodes and leases as the database sees them now (its clock decides liveness and expiry).

    A node is ``live`` unless it is leaving (SIGTERM), or has been silent for ``lease_seconds``
    (by then its leases have run out and other nodes take its tables), or holds no lease, has
    missed a renewal (silent for 1.5 renewal periods) and another node took a lease after its last
    heartbeat (its tables were taken: it is gone even if the window was given too long).
    ``lease_seconds`` None: the lease the nodes renew with, as the held leases show it (for each
    node, the longest its held leases run past its last heartbeat; the shortest of those), else
    :data:`DEFAULT_LEASE_SECONDS`; ``renew_seconds`` None: a quarter of that shown lease (the
    default renewal), else of ``lease_seconds``."""
    with _connect(url) as conn:
        try:
            nodes = conn.execute(_NODES_SQL).fetchall()
            leases = conn.execute(
                "SELECT l.table_id, l.node, l.epoch, EXTRACT(EPOCH FROM l.expires_at - clock_timestamp())::float8, "
                "p.node, p.reason FROM leases l LEFT JOIN pins p USING (table_id) ORDER BY l.table_id").fetchall()
            pins = conn.execute("SELECT table_id, node, pinned_by, reason FROM pins ORDER BY table_id").fetchall()
        except Exception as exc:  # psycopg.Error: not a dealer journal, or no rights
            raise ValueError(f"cannot read the cluster tables: {' '.join(str(exc).split())}") from None
    lease_rows = [{"table": t, "node": n, "epoch": int(e), "expires_in_s": round(float(x), 3),
                   "held": n is not None and x > 0, "pinned_to": pn, "pin_reason": pr}
                  for t, n, e, x, pn, pr in leases]
    horizon = max([abs(r["expires_in_s"]) for r in lease_rows if r["held"]] or [0.0])
    seen = [float(w) for *_, w in nodes if w is not None]
    observed = min(max(min(seen), 1.0), 300.0) if seen else None  # the lease the nodes renew with
    if lease_seconds is None:
        lease_seconds, lease_source = (observed, "leases") if observed else (DEFAULT_LEASE_SECONDS, "default")
    renew = renew_seconds if renew_seconds is not None else (observed or lease_seconds) / 4
    out_nodes = []
    for n, s, lv, a, st, taken, _ in nodes:
        holds = sum(1 for r in lease_rows if r["node"] == n and r["held"])
        silent = float(a)
        if lv:
            state, why = "leaving", "handing its tables over (SIGTERM), or serving none: its journal cannot be written"
        elif silent >= lease_seconds:
            state, why = "down", f"silent for {silent:.1f} s, at least a lease ({lease_seconds:.1f} s)"
        elif holds == 0 and taken and silent > 1.5 * renew:
            state, why = "down", "missed a renewal, and other nodes took tables after its last heartbeat"
        else:
            state, why = "live", ""
        out_nodes.append({"node": n, "session": s, "leaving": bool(lv), "heard_s_ago": round(silent, 3),
                          "started_at": st.isoformat(), "holds": holds, "live": state == "live", "state": state,
                          "why": why})
    return {
        "nodes": out_nodes,
        "leases": lease_rows,
        "pins": [{"table": t, "node": n, "by": b, "reason": r} for t, n, b, r in pins],
        "unowned": [r["table"] for r in lease_rows if not r["held"]],
        "lease_horizon_s": horizon,
        "lease_seconds": round(lease_seconds, 3),
        "lease_seconds_from": lease_source,
    }


def move(url: str, table: str, node: str, reason: str, *, force: bool = False) -> str:
    """Pin ``table`` to ``node`` (recorded with who asked and why); returns what will happen."""
    who = f"{getpass.getuser()}"
    with _connect(url) as conn:
        with conn.transaction():
            known = conn.execute("SELECT 1 FROM nodes WHERE node = %s", (node,)).fetchone()
            if known is None and not force:
                raise ValueError(f"node {node} has never joined this cluster (no row in nodes): check the name, "
                                 "or --force to pin it ahead of its first start")
            table_known = conn.execute("SELECT node FROM leases WHERE table_id = %s", (table,)).fetchone()
            if table_known is None and not force:
                raise ValueError(f"table {table} has no lease in this journal (no node ever ran it): check the id, "
                                 "or --force")
            conn.execute(
                "INSERT INTO pins (table_id, node, pinned_at, pinned_by, reason) VALUES (%s, %s, clock_timestamp(), "
                "current_user || ' (' || %s || ')', %s) ON CONFLICT (table_id) DO UPDATE SET node = excluded.node, "
                "pinned_at = excluded.pinned_at, pinned_by = excluded.pinned_by, reason = excluded.reason",
                (table, node, who, reason))
            conn.execute("INSERT INTO cluster_log (at, by, action, table_id, node, reason) VALUES "
                         "(clock_timestamp(), current_user || ' (' || %s || ')', 'move', %s, %s, %s)",
                         (who, table, node, reason))
            conn.execute("NOTIFY dealer_leases")
    holder = table_known[0] if table_known else None
    if holder == node:
        return f"table {table} is pinned to {node}, which already owns it"
    return (f"table {table} is pinned to {node}; its owner ({holder or 'nobody'}) hands it over when its round "
            f"ends (dealer cluster status shows the move)")


def unpin(url: str, table: str, reason: str) -> str:
    who = getpass.getuser()
    with _connect(url) as conn:
        with conn.transaction():
            gone = conn.execute("DELETE FROM pins WHERE table_id = %s RETURNING node", (table,)).fetchone()
            if gone is None:
                raise ValueError(f"table {table} is not pinned")
            conn.execute("INSERT INTO cluster_log (at, by, action, table_id, node, reason) VALUES "
                         "(clock_timestamp(), current_user || ' (' || %s || ')', 'unpin', %s, %s, %s)",
                         (who, table, gone[0], reason))
            conn.execute("NOTIFY dealer_leases")
    return f"table {table} is no longer pinned (was {gone[0]}): placement decides again"


# -- dealer cluster init ------------------------------------------------------------------------

#: The group roles (fixed names: the grants below and the pg_hba lines name them).
NODE_GROUP, AUDITOR_GROUP, OPERATOR_GROUP = "dealer_node", "dealer_auditor", "dealer_operator"
GROUPS = (NODE_GROUP, AUDITOR_GROUP, OPERATOR_GROUP)

#: Creates the group roles: needs CREATEROLE (``dealer cluster init`` runs it as the admin).
GROUPS_SQL = """\
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'dealer_node') THEN
        CREATE ROLE dealer_node NOLOGIN;      -- the nodes' logins are its members
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'dealer_auditor') THEN
        CREATE ROLE dealer_auditor NOLOGIN;   -- reads everything, writes nothing
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'dealer_operator') THEN
        CREATE ROLE dealer_operator NOLOGIN;  -- `dealer cluster status|move|unpin`: pins and their log only
    END IF;
END $$;
"""

#: The least-privilege grants on the journal's database and tables: run as the tables' owner (or
#: a superuser), after the schema exists. Idempotent.
GRANTS_SQL = """\
DO $$
BEGIN
    EXECUTE format('REVOKE ALL ON DATABASE %I FROM PUBLIC', current_database());
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO dealer_node, dealer_auditor, dealer_operator',
                   current_database());
END $$;
REVOKE CREATE ON SCHEMA public FROM PUBLIC;

REVOKE ALL ON meta, nodes, leases, events, commands, outbox, reader_state, pins, cluster_log
    FROM PUBLIC, dealer_node, dealer_auditor, dealer_operator;
REVOKE ALL ON SEQUENCE cluster_log_id_seq FROM PUBLIC, dealer_node, dealer_auditor, dealer_operator;
REVOKE ALL ON SEQUENCE events_id_seq, outbox_id_seq FROM PUBLIC, dealer_node, dealer_auditor;

GRANT USAGE ON SCHEMA public TO dealer_node, dealer_auditor, dealer_operator;

GRANT SELECT ON meta TO dealer_node;
GRANT SELECT, INSERT ON events, commands TO dealer_node;
GRANT SELECT, INSERT, DELETE ON outbox TO dealer_node;
GRANT SELECT, INSERT, UPDATE ON reader_state, leases, nodes TO dealer_node;
GRANT USAGE ON SEQUENCE events_id_seq, outbox_id_seq TO dealer_node;

GRANT SELECT ON meta, nodes, leases, events, commands, outbox, reader_state TO dealer_auditor;

-- Nodes read the operators' pins (placement); operators write pins and append to their log,
-- and read nodes and leases for `dealer cluster status`; auditors read the log.
GRANT SELECT ON pins TO dealer_node;
GRANT SELECT, INSERT, UPDATE, DELETE ON pins TO dealer_operator;
GRANT SELECT, INSERT ON cluster_log TO dealer_operator;
GRANT USAGE ON SEQUENCE cluster_log_id_seq TO dealer_operator;
GRANT SELECT ON nodes, leases TO dealer_operator;
GRANT SELECT ON pins, cluster_log TO dealer_auditor;
"""

#: deploy/postgresql/roles.sql is this text under its comment header (tests/test_cluster_init.py).
ROLES_SQL = GROUPS_SQL + "\n" + GRANTS_SQL

#: A role or database name ``init`` creates: plain lower-case identifiers, never quoted by a person.
_ROLE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
#: A node id (as service.node_id accepts it).
_NODE = re.compile(r"^[A-Za-z0-9_:\-]{1,64}$")
#: The database's address as the nodes reach it (a name, an IPv4 or IPv6 address).
_HOST = re.compile(r"^[A-Za-z0-9.:\-]{1,253}$")
#: Characters a CA path may hold in a URL that a shell sources from node.env.
_PATH = re.compile(r"^/[A-Za-z0-9_./\-]+$")
SSLMODES = ("verify-full", "verify-ca", "require", "prefer", "disable")


def node_role(node: str) -> str:
    """The login role of node ``node``: ``dealer_`` + the node id in lower case, ``-`` and ``:`` as ``_``."""
    return "dealer_" + re.sub(r"[^a-z0-9_]", "_", node.lower())


@dataclass
class _Login:
    kind: str  # node | auditor | operator
    name: str  # the node id, or the role
    role: str
    group: str


def _pgpass_escape(field: str) -> str:
    return field.replace("\\", "\\\\").replace(":", "\\:")


def _pgpass_fields(line: str) -> list[str]:
    fields: list[str] = []
    cur, esc = "", False
    for ch in line:
        if esc:
            cur, esc = cur + ch, False
        elif ch == "\\":
            esc = True
        elif ch == ":" and len(fields) < 4:
            fields.append(cur)
            cur = ""
        else:
            cur += ch
    return [*fields, cur]


def _kept_password(path: Path, role: str) -> str | None:
    """The password of ``role`` in an existing password file (None: no file)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = _pgpass_fields(line)
        if len(fields) == 5 and fields[3] == role and fields[4]:
            return fields[4]
    raise ValueError(f"{path} holds no password line for role {role}: remove the file, or use --rotate")


def _write_private(path: Path, text: str, mode: int = 0o600) -> None:
    """Write ``text`` to ``path`` with ``mode`` from the first byte (a temporary file renamed)."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.fchmod(fd, mode)
        os.write(fd, text.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _schema_url(admin_url: str, database: str, owner: str) -> str:
    """The admin URL on ``database``, its session running as ``owner`` (libpq's options ``-c role``)."""
    parts = urlsplit(admin_url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    options = " ".join(v for k, v in query if k == "options")
    query = [(k, v) for k, v in query if k not in ("options", "dbname")]
    query.append(("options", f"{options} -c role={owner}".strip()))
    return urlunsplit((parts.scheme, parts.netloc, "/" + database, urlencode(query, quote_via=quote), ""))


def journal_url(role: str, host: str, port: int, database: str, sslmode: str, ca_file: str) -> str:
    """The journal URL of a login role (no password: that is in its host's PGPASSFILE)."""
    where = f"[{host}]" if ":" in host else host
    query = f"sslmode={sslmode}"
    if sslmode in ("verify-full", "verify-ca"):
        query += f"&sslrootcert={quote(ca_file, safe='/')}"
    return f"postgresql://{role}@{where}:{port}/{database}?{query}"


def _has_role(conn: Any, role: str) -> bool:
    return conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone() is not None


def _is_member(conn: Any, role: str, group: str) -> bool:
    return conn.execute("SELECT 1 FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.member "
                        "JOIN pg_roles g ON g.oid = m.roleid WHERE r.rolname = %s AND g.rolname = %s",
                        (role, group)).fetchone() is not None


def _one(exc: BaseException, secret: str | None) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    text = text.removeprefix("connection failed: ")
    return text.replace(secret, "***") if secret else text


def init(admin_url: str, *, database: str = "dealer", owner: str = "dealer_owner", nodes: Sequence[str] = (),
         auditors: Sequence[str] = (), operators: Sequence[str] = (), out: str | Path | None = None,
         host: str | None = None, port: int | None = None, sslmode: str = "verify-full",
         ca_file: str = "/etc/dealer/pg-ca.pem", rotate: bool = False) -> dict[str, Any]:
    """Bootstrap the cluster's database (module docstring); return what was done, step by step.
    Raises ValueError (bad input, missing rights) or psycopg.Error / JournalError (the database)."""
    import psycopg
    from psycopg import sql

    from dealer.edge.journal_urls import redact, url_password as _password
    from dealer.edge.journals import init_schema, is_url

    if not is_url(admin_url):
        raise ValueError(f"--admin-url must be a postgresql:// URL, got {admin_url.split('://')[0][:40]!r}")
    secret = _password(admin_url)
    for what, name in [("--database", database), ("--owner", owner), *(("--auditor", a) for a in auditors),
                       *(("--operator", o) for o in operators)]:
        if not _ROLE.match(name):
            raise ValueError(f"{what} {name!r} is not a plain role name (lower-case letters, digits and _, "
                             "starting with a letter or _, at most 63)")
    for n in nodes:
        if not _NODE.match(n):
            raise ValueError(f"--node {n!r} is not a node id (1 to 64 letters, digits, '_', ':' or '-')")
    if sslmode not in SSLMODES:
        raise ValueError(f"--sslmode must be one of {', '.join(SSLMODES)}")
    if sslmode in ("verify-full", "verify-ca") and not _PATH.match(ca_file):
        raise ValueError(f"--ca-file {ca_file!r} must be an absolute path of letters, digits, '_', '.', '/', '-'")
    logins = ([_Login("node", n, node_role(n), NODE_GROUP) for n in nodes]
              + [_Login("auditor", a, a, AUDITOR_GROUP) for a in auditors]
              + [_Login("operator", o, o, OPERATOR_GROUP) for o in operators])
    reserved = {owner, *GROUPS}
    seen: dict[str, str] = {}
    for lg in logins:
        if not _ROLE.match(lg.role):
            raise ValueError(f"node {lg.name}: its login role {lg.role} is too long (at most 63 characters)")
        if lg.role in reserved:
            raise ValueError(f"{lg.kind} {lg.name}: its login role {lg.role} is the name of the owner or a group role")
        for key in (f"role {lg.role}", f"files {lg.name}.*"):
            if key in seen:
                raise ValueError(f"{lg.kind} {lg.name} and {seen[key]} would share the login {key}: give distinct "
                                 "names")
            seen[key] = f"{lg.kind} {lg.name}"
    if logins and out is None:
        raise ValueError("give --out DIR: each login's password file (and each node's env file) is written there")
    out_dir = Path(out) if out is not None else None

    steps: list[dict[str, Any]] = []
    where = redact(admin_url)
    try:
        admin = psycopg.connect(admin_url, autocommit=True, connect_timeout=5, application_name="dealer cluster init")
    except psycopg.Error as exc:
        raise ValueError(f"cannot connect to the database as the admin ({where}): {_one(exc, secret)}") from None
    with admin:
        row = admin.execute(
            "SELECT current_user, rolsuper, rolcreaterole, rolcreatedb FROM pg_roles "
            "WHERE rolname = current_user").fetchone()
        assert row is not None  # the current user always has its pg_roles row
        me, superuser, createrole, createdb = row
        if not (superuser or (createrole and createdb)):
            raise ValueError(f"role {me} may not do this: connect as a superuser, or a role with CREATEROLE "
                             "and CREATEDB")
        if host is None:
            host = admin.info.host
            if not host or host.startswith("/"):
                raise ValueError("the admin connection is over a local socket: give --host, the name the nodes "
                                 "reach the database by")
        if port is None:
            port = int(admin.info.port)
        if not _HOST.match(host):
            raise ValueError(f"--host {host!r} is not a host name or address")

        # 1. the owner: owns the database and every journal object; nobody logs in as it
        if _has_role(admin, owner):
            steps.append({"step": "owner", "role": owner, "done": "exists"})
        else:
            admin.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(owner)))
            steps.append({"step": "owner", "role": owner, "done": "created"})
        if not superuser and not _is_member(admin, me, owner):  # to create the database for it and act as it
            admin.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(owner), sql.Identifier(me)))
        # 2. the database
        row = admin.execute("SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = %s",
                            (database,)).fetchone()
        if row is None:
            admin.execute(sql.SQL("CREATE DATABASE {} OWNER {} ENCODING 'UTF8'").format(
                sql.Identifier(database), sql.Identifier(owner)))
            steps.append({"step": "database", "database": database, "done": "created"})
        elif row[0] != owner:
            raise ValueError(f"database {database} exists and belongs to {row[0]}, not {owner}: give --owner {row[0]}, "
                             f"or ALTER DATABASE {database} OWNER TO {owner}")
        else:
            steps.append({"step": "database", "database": database, "done": "exists"})
    # 3. the journal schema, created as the owner (python -m dealer.edge.journals init does the same)
    made = init_schema(_schema_url(admin_url, database, owner))
    steps.append({"step": "schema", "done": made["source"], "journal_id": made["journal_id"]})
    # 4. the group roles and their grants (deploy/postgresql/roles.sql)
    try:
        db = psycopg.connect(admin_url, dbname=database, autocommit=True, connect_timeout=5,
                             application_name="dealer cluster init")
    except psycopg.Error as exc:
        raise ValueError(f"cannot connect to database {database} as the admin: {_one(exc, secret)}") from None
    with db:
        had = {r[0] for r in db.execute("SELECT rolname FROM pg_roles WHERE rolname = ANY(%s)", (list(GROUPS),))}
        db.execute(GROUPS_SQL)
        db.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(owner)))
        db.execute(GRANTS_SQL)
        db.execute("RESET ROLE")
        steps.append({"step": "groups", "created": [g for g in GROUPS if g not in had],
                      "exists": [g for g in GROUPS if g in had]})
        # 5. the logins: a password file first (a failure below leaves it, and a second run applies it)
        if out_dir is not None and logins:
            try:
                out_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            except OSError as exc:
                raise ValueError(f"cannot create {out_dir}: {exc.strerror or exc}") from None
        for lg in logins:
            assert out_dir is not None
            pgpass = out_dir / f"{lg.name}.pgpass"
            password = None if rotate else _kept_password(pgpass, lg.role)
            how = "kept" if password else ("new (--rotate)" if rotate and pgpass.exists() else "new")
            password = password or secrets.token_urlsafe(24)
            line = ":".join(_pgpass_escape(f) for f in (host, str(port), database, lg.role, password))
            _write_private(pgpass, f"# {lg.kind} {lg.name}: written by dealer cluster init\n{line}\n")
            verifier = db.pgconn.encrypt_password(password.encode(), lg.role.encode(), b"scram-sha-256").decode()
            if _has_role(db, lg.role):
                db.execute(sql.SQL("ALTER ROLE {} WITH LOGIN PASSWORD {}").format(
                    sql.Identifier(lg.role), sql.Literal(verifier)))
                done = "exists"
            else:
                db.execute(sql.SQL("CREATE ROLE {} WITH LOGIN PASSWORD {}").format(
                    sql.Identifier(lg.role), sql.Literal(verifier)))
                done = "created"
            if not _is_member(db, lg.role, lg.group):
                db.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(lg.group), sql.Identifier(lg.role)))
            step: dict[str, Any] = {"step": lg.kind, "name": lg.name, "role": lg.role, "group": lg.group,
                                    "done": done, "password": how, "pgpass": str(pgpass),
                                    "journal_url": journal_url(lg.role, host, port, database, sslmode, ca_file)}
            if lg.kind == "node":
                env = out_dir / f"{lg.name}.env"
                _write_private(env, f"# node {lg.name}: written by dealer cluster init; install as "
                                    "/etc/dealer/node.env on its host\n"
                                    f"DEALER_SERVICE__NODE_ID={lg.name}\n"
                                    f"DEALER_SERVICE__JOURNAL_URL=\"{step['journal_url']}\"\n")
                step["env"] = str(env)
            steps.append(step)
    return {"database": database, "owner": owner, "host": host, "port": port, "journal_id": made["journal_id"],
            "steps": steps}


def _init_text(report: dict[str, Any]) -> str:
    lines = []
    for st in report["steps"]:
        kind = st["step"]
        if kind == "owner":
            lines.append(f"owner role {st['role']}: {st['done']}" + (" (NOLOGIN)" if st["done"] == "created" else ""))
        elif kind == "database":
            lines.append(f"database {st['database']}: {st['done']} (owner {report['owner']})")
        elif kind == "schema":
            lines.append(f"journal schema: {st['done']} (journal id {st['journal_id']})")
        elif kind == "groups":
            said = [f"{w} {', '.join(st[k])}" for k, w in (("created", "created"), ("exists", "already there"))
                    if st[k]]
            lines.append(f"group roles: {'; '.join(said)}; grants applied (deploy/postgresql/roles.sql)")
        else:
            what = f"node {st['name']}" if kind == "node" else f"{kind} {st['name']}"
            lines.append(f"{what}: login role {st['role']} {st['done']} (member of {st['group']}), password "
                         f"{st['password']} in {st['pgpass']}")
            lines.append(f"  journal URL: {st['journal_url']}")
            if kind == "node":
                lines.append(f"  node host: {st['env']} -> /etc/dealer/node.env, {st['pgpass']} -> "
                             "/var/lib/dealer/.pgpass")
    return "\n".join(lines)


def _cmd_init(args: argparse.Namespace) -> int:
    prog = "dealer cluster init"
    import psycopg

    from dealer.edge.journal import JournalError

    try:
        report = init(args.admin_url, database=args.database, owner=args.owner, nodes=args.node or [],
                      auditors=args.auditor or [], operators=args.operator or [], out=args.out, host=args.host,
                      port=args.port, sslmode=args.sslmode, ca_file=args.ca_file, rotate=args.rotate)
    except (ValueError, JournalError) as exc:
        return fail(prog, str(exc))
    except psycopg.Error as exc:
        from dealer.edge.journal_urls import url_password as _password

        return fail(prog, f"the database refused: {_one(exc, _password(args.admin_url))}")
    except OSError as exc:
        return fail(prog, f"cannot write {getattr(exc, 'filename', '') or ''}: {exc.strerror or exc}")
    print(json.dumps(report, sort_keys=True) if args.json else _init_text(report))
    return 0


def _text(st: dict[str, Any]) -> str:
    lines = [f"live: heard within a lease ({st['lease_seconds']:.1f} s, from {st['lease_seconds_from']})",
             "NODE            LIVE     HOLDS  HEARD(s)  SESSION"]
    for n in st["nodes"]:
        live = {"live": "yes", "down": "DOWN", "leaving": "leaving"}[n["state"]]
        why = f"  ({n['why']})" if n["state"] == "down" else ""
        lines.append(f"{n['node']:<15} {live:<8} {n['holds']:>5}  {n['heard_s_ago']:>8.1f}  {n['session']}{why}")
    lines.append("")
    lines.append("TABLE       OWNER           EPOCH  EXPIRES_IN(s)  PIN")
    for r in st["leases"]:
        owner = r["node"] if r["held"] else f"({r['node'] or 'released'})"
        lines.append(f"{r['table']:<11} {owner:<15} {r['epoch']:>5}  {r['expires_in_s']:>13.1f}  {r['pinned_to'] or ''}")
    if st["unowned"]:
        lines.append(f"\nnot owned now: {', '.join(st['unowned'])}")
    return "\n".join(lines)


def _cmd(args: argparse.Namespace) -> int:
    prog = f"dealer cluster {args.cluster}"
    try:
        url = _url(args)
        if args.cluster == "status":
            lease, renew, source = args.lease_seconds, None, "option"
            if lease is None and args.config:
                cluster = _settings(args).cluster
                lease, renew, source = cluster.lease_seconds, cluster.renew, "config"
            st = status(url, lease, renew, source)
            print(json.dumps(st, sort_keys=True) if args.json else _text(st))
            return 0
        if not _ID.match(args.table):
            return fail(prog, f"table id {args.table!r} is not valid")
        if args.cluster == "move":
            if not _ID.match(args.to):
                return fail(prog, f"node id {args.to!r} is not valid")
            print(move(url, args.table, args.to, args.reason, force=args.force))
        else:
            print(unpin(url, args.table, args.reason))
        return 0
    except ValueError as exc:
        return fail(prog, str(exc))
    except Exception as exc:  # psycopg.Error: no rights (not dealer_operator), the server went away
        import psycopg

        if not isinstance(exc, psycopg.Error):
            raise
        return fail(prog, f"the database refused: {' '.join(str(exc).split())}")


def register(sub: Any) -> None:
    c = sub.add_parser("cluster", help="set up a multi-node studio's database; its nodes and table leases; move a "
                       "table by hand")
    csub = c.add_subparsers(dest="cluster", required=True, metavar="ACTION")

    i = csub.add_parser(
        "init", help="create the journal database, its schema and every role (idempotent: run it again to add a node)",
        description="Create, as a PostgreSQL superuser (or a role with CREATEROLE and CREATEDB), everything a "
        "multi-node studio's journal needs, keeping what exists: the owner role (NOLOGIN), the database, the journal "
        "schema, the group roles dealer_node, dealer_auditor and dealer_operator with their grants "
        "(deploy/postgresql/roles.sql), and a login role per node (dealer_ + the node id, '-' as '_'), auditor and "
        "operator. Each login's password goes into OUT/NAME.pgpass (its libpq password file line, mode 0600; kept "
        "when the file exists, new with --rotate), never on the screen; each node's OUT/NODE.env holds its node id "
        "and DEALER_SERVICE__JOURNAL_URL for /etc/dealer/node.env. The admin's password comes from PGPASSWORD or "
        "~/.pgpass, as for psql. Prints what it did and each login's journal URL. deploy/cluster/README.md.")
    i.add_argument("--admin-url", required=True, metavar="URL",
                   help="postgresql://postgres@HOST/postgres: a superuser (or CREATEROLE and CREATEDB); no password "
                   "in it (PGPASSWORD or ~/.pgpass)")
    i.add_argument("--node", action="append", metavar="NODE", help="a node id (repeat: --node node-a --node node-b)")
    i.add_argument("--auditor", action="append", metavar="ROLE", help="an auditor's login role (member of "
                   "dealer_auditor: reads only); repeatable")
    i.add_argument("--operator", action="append", metavar="ROLE", help="an operator's login role (member of "
                   "dealer_operator: dealer cluster status, move, unpin); repeatable")
    i.add_argument("--out", metavar="DIR", help="where each login's NAME.pgpass and each node's NODE.env go "
                   "(created 0700); needed with any login")
    i.add_argument("--database", default="dealer", metavar="NAME", help="the journal's database (default: dealer)")
    i.add_argument("--owner", default="dealer_owner", metavar="ROLE",
                   help="the role that owns the database and the journal (default: dealer_owner)")
    i.add_argument("--host", metavar="HOST", help="the database's address as the nodes reach it (default: the admin "
                   "URL's)")
    i.add_argument("--port", type=int_range(1, 65535), metavar="PORT", help="its port (default: the admin URL's)")
    i.add_argument("--sslmode", default="verify-full", choices=SSLMODES,
                   help="the sslmode of the journal URLs (default: verify-full)")
    i.add_argument("--ca-file", default="/etc/dealer/pg-ca.pem", metavar="FILE",
                   help="the CA the nodes verify the server with, on the node hosts (default: /etc/dealer/pg-ca.pem)")
    i.add_argument("--rotate", action="store_true", help="new passwords for every login named (default: keep them)")
    i.add_argument("--json", action="store_true", help="one JSON object instead of the lines")
    i.set_defaults(func=_cmd_init)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--journal", metavar="URL", help="postgresql://... (default: the config's service.journal_url)")
        p.add_argument("--config", metavar="FILE", help=CONFIG_HELP)

    s = csub.add_parser("status", help="every node and table lease, as the database sees them now")
    common(s)
    s.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    s.add_argument("--lease-seconds", type=seconds(1.0, 300.0, allow_low=True), metavar="S",
                   help="the cluster's lease: a node silent this long is DOWN (default: the config's "
                   "[cluster].lease_seconds, else what the held leases show)")
    m = csub.add_parser("move", help="pin a table to a node: its owner hands it over when its round ends")
    common(m)
    m.add_argument("table", help="table id")
    m.add_argument("--to", required=True, metavar="NODE", help="the node that should run it")
    m.add_argument("--reason", required=True, help="why (kept in cluster_log for the audit)")
    m.add_argument("--force", action="store_true", help="pin to a node that has not joined yet, or an unknown table")
    u = csub.add_parser("unpin", help="give a pinned table back to placement")
    common(u)
    u.add_argument("table", help="table id")
    u.add_argument("--reason", required=True, help="why (kept in cluster_log)")
    for p in (s, m, u):
        p.set_defaults(func=_cmd)


__all__ = ["GRANTS_SQL", "GROUPS", "GROUPS_SQL", "ROLES_SQL", "init", "journal_url", "move", "node_role",
           "register", "status", "unpin"]

if __name__ == "__main__":  # pragma: no cover
    sys.exit(0)
