"""deploy/cluster/README.md's "Set up" works word for word, and ``dealer cluster status`` says a
killed node is DOWN by the time its tables have moved (issue 28).

The README's shell blocks are read from the file itself: the same lines run here, with the
host's paths moved into a temporary folder and ``db.studio.lan`` replaced by a private
PostgreSQL's address and port (nothing else is parametrised). Step 1 (the database server) is
done to the private server's data directory: the TLS certificate from the test CA
(deploy/tls/make-test-ca.sh, whose server certificate names 127.0.0.1), deploy/postgresql/
dealer.conf in conf.d, deploy/cluster/pg_hba.dealer.conf with the studio network set to
127.0.0.1/32 as the only access lines, and the administrator's password. ``install`` is done
by copying (no ``-o``/``-g``: the test has no dealer user), ``runuser -u dealer --`` and
``systemctl`` are left out, and the nodes' lease loops and journals run in this process as
``dealer run`` would run them (dealer/edge/runner.py), with each node's environment file and
password file as its unit would give them.

Then: ``dealer cluster init`` ran twice (the second run keeps everything, passwords included);
each node logs in with its own password over verified TLS only, takes leases, writes journal
rows and cannot change or remove one, nor create anything; the auditor reads and verifies the
chains and writes nothing; the operator runs ``dealer cluster status`` and sees a node killed
(its lease loop stopped dead, nothing released) as DOWN by the time another node has taken
its tables. Bad input is one line on stderr and exit 2, and a role with only CREATEROLE and
CREATEDB bootstraps as a superuser does."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from dealer.cli import cluster as cluster_cli
from dealer.core.events import CloseBetting, OpenRound
from dealer.edge.config import Settings, load_settings
from dealer.edge.journal import Batch
from dealer.edge.journal_pg import PgJournal
from dealer.edge.journals import open_journal
from dealer.edge.leases import LeaseManager
from simulators.broker import free_port
from simulators.pgserver import PgServer
from tests.conftest import wait_until

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "deploy" / "cluster" / "README.md"
ADMIN_PASSWORD = "admin-secret-of-the-test"  # as `\password postgres` would set it
NODES = ("node-a", "node-b", "node-c")


def setup_blocks() -> list[list[str]]:
    """The ``sh`` blocks of the README's "Set up" section, one list of command lines each."""
    section = README.read_text().split("\n## Set up\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^ *```sh\n(.*?)^ *```", section, flags=re.S | re.M)
    return [[line.strip() for line in b.splitlines() if line.strip()] for b in blocks]


def dealer_shim(bin_dir: Path) -> None:
    """``dealer`` on PATH for the shell lines: this interpreter's package, installed or not."""
    bin_dir.mkdir(exist_ok=True)
    shim = bin_dir / "dealer"
    python, root = shlex.quote(sys.executable), shlex.quote(str(ROOT))
    shim.write_text(f'#!/bin/sh\nPYTHONPATH={root} exec {python} -m dealer "$@"\n')
    shim.chmod(0o755)


def install(argv: list[str]) -> None:
    """``install [-m MODE] [-o USER] [-g GROUP] SRC DST``: a copy with the mode (owners left out)."""
    mode, args, it = None, [], iter(argv)
    for a in it:
        if a == "-m":
            mode = int(next(it), 8)
        elif a in ("-o", "-g"):
            next(it)
        else:
            args.append(a)
    src, dst = Path(args[0]), Path(args[1])
    if args[1].endswith("/") or dst.is_dir():
        dst = dst / src.name
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src if src.is_absolute() else ROOT / src, dst)
    if mode is not None:
        dst.chmod(mode)


def env_file(path: Path) -> dict[str, str]:
    """KEY=value lines as sh (``set -a; . FILE``) and systemd's EnvironmentFile= read them."""
    out = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, _, value = line.partition("=")
            [out[key]] = shlex.split(value)
    return out


def own_to_server(path: Path, data: Path) -> None:
    if os.geteuid() == 0:
        st = data.stat()
        os.chown(path, st.st_uid, st.st_gid)


class Studio:
    """The README's studio after steps 1 to 3 (module fixture below)."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.server = PgServer()
        self.moved: dict[str, str] = {}
        self.env = {k: v for k, v in os.environ.items()
                    if not k.upper().startswith(("DEALER_", "PG"))} | {"PYTHONPATH": str(ROOT)}
        self.env["PATH"] = f"{tmp / 'bin'}:{self.env.get('PATH', '/usr/bin:/bin')}"
        self.inits: list[subprocess.CompletedProcess[str]] = []
        self.checks: list[subprocess.CompletedProcess[str]] = []

    def here(self, text: str) -> str:
        for host, test in self.moved.items():
            text = text.replace(host, test)
        return text

    def dealer(self, line: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "dealer", *shlex.split(self.here(line))[1:]], cwd=ROOT,
                              env=self.env | env, capture_output=True, text=True, timeout=120)

    # -- step 1: the database server ------------------------------------------------------
    def database_server(self, lines: list[str]) -> None:
        assert lines == [
            "install -m 0644 deploy/postgresql/dealer.conf /etc/postgresql/15/main/conf.d/dealer.conf",
            "cat deploy/cluster/pg_hba.dealer.conf >> /etc/postgresql/15/main/pg_hba.conf",
            "systemctl restart postgresql",
            "runuser -u postgres -- psql -c '\\password postgres'"], lines
        tls = self.tmp / "tls"
        subprocess.run(["bash", str(ROOT / "deploy/tls/make-test-ca.sh"), str(tls)], check=True, capture_output=True,
                       timeout=120)
        self.moved["/path/to/studio-db-ca.pem"] = str(tls / "ca.crt")
        data = self.server.data
        self.server.start()
        with psycopg.connect(self.server.url(), autocommit=True) as c:  # \password postgres
            c.execute(f"ALTER ROLE postgres PASSWORD '{ADMIN_PASSWORD}'")
        self.server.stop()
        # the server's certificate and key (dealer.conf: ssl = on, the default file names)
        for src, dst in (("broker.crt", "server.crt"), ("broker.key", "server.key")):
            shutil.copyfile(tls / src, data / dst)
            (data / dst).chmod(0o600)
            own_to_server(data / dst, data)
        # install dealer.conf into conf.d, which Debian's postgresql.conf includes
        (data / "conf.d").mkdir()
        install(shlex.split(lines[0].replace("/etc/postgresql/15/main", str(data)))[1:])
        own_to_server(data / "conf.d", data)
        own_to_server(data / "conf.d" / "dealer.conf", data)
        with (data / "postgresql.conf").open("a") as f:
            f.write("\ninclude_dir = 'conf.d'\n")
        # the access lines, the studio network set to this host: the server's only ones
        hba = (ROOT / "deploy/cluster/pg_hba.dealer.conf").read_text()
        assert hba.count("10.20.0.0/24") >= 4
        (data / "pg_hba.conf").write_text(hba.replace("10.20.0.0/24", "127.0.0.1/32"))
        self.server.start()  # systemctl restart postgresql

    # -- step 2: dealer cluster init ----------------------------------------------------------
    def init(self, lines: list[str]) -> None:
        install_ca, init = lines
        install(shlex.split(self.here(install_ca))[1:])
        for _ in range(2):  # idempotent: the second run keeps everything
            self.inits.append(self.dealer(init, PGPASSWORD=ADMIN_PASSWORD))

    # -- step 3: a node host --------------------------------------------------------------------
    def node_host(self, lines: list[str]) -> None:
        for line in lines:
            argv = shlex.split(self.here(line))
            if argv[0] == "install":
                install(argv[1:])
                if argv[-1].endswith(".toml"):  # the configuration's own host paths, moved too
                    installed = Path(argv[-1])
                    installed.write_text(self.here(installed.read_text()))
            elif argv[:4] == ["runuser", "-u", "dealer", "--"]:
                self.checks.append(subprocess.run(argv[4:], cwd=ROOT, env=self.env, capture_output=True, text=True,
                                                  timeout=120))
            else:
                assert argv[0] == "systemctl", line

    def settings(self, node: str, monkeypatch: pytest.MonkeyPatch) -> Settings:
        """The node's configuration as its unit starts it: studio.toml with its node.env."""
        with monkeypatch.context() as m:
            for k, v in env_file(self.tmp / "dealer-db" / f"{node}.env").items():
                m.setenv(k, v)
            return load_settings(self.tmp / "etc" / "studio.toml")

    def url(self, role: str) -> str:
        """The journal URL init printed for a login."""
        [url] = re.findall(rf"journal URL: (postgresql://{role}@\S+)", self.inits[-1].stdout)
        return url

    def pgpass(self, *names: str) -> Path:
        """One password file with these logins' lines (a host with several, or a person's ~/.pgpass)."""
        path = self.tmp / f"{'+'.join(names)}.pgpass"
        path.write_text("".join((self.tmp / "dealer-db" / f"{n}.pgpass").read_text() for n in names))
        path.chmod(0o600)
        return path


@pytest.fixture(scope="module")
def studio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Studio]:
    tmp = tmp_path_factory.mktemp("studio")
    s = Studio(tmp)
    dealer_shim(tmp / "bin")
    try:
        s.moved.update({"/etc/dealer": str(tmp / "etc"), "/var/lib/dealer": str(tmp / "var"),
                        "/root/dealer-db": str(tmp / "dealer-db"), "/etc/systemd/system": str(tmp / "systemd")})
        s.moved["db.studio.lan"] = f"127.0.0.1:{s.server.port}"
        # what step 3 installs "as for dealer@.service" (docs/setup.md): the broker's CA and password
        (tmp / "etc" / "tls").mkdir(parents=True)
        (tmp / "etc" / "tls" / "ca.crt").write_text("the broker's CA\n")
        (tmp / "etc" / "broker" / "secrets").mkdir(parents=True)
        (tmp / "etc" / "broker" / "secrets" / "dealer-backend.pw").write_text("broker-password\n")
        (tmp / "etc" / "broker" / "secrets" / "dealer-backend.pw").chmod(0o600)
        (tmp / "var").mkdir()
        one, two, three = setup_blocks()
        s.database_server(one)
        s.init(two)
        s.node_host(three)
        yield s
    finally:
        s.server.cleanup()


def test_init_twice_then_the_node_check_passes(studio: Studio) -> None:
    first, second = studio.inits
    assert first.returncode == 0 and first.stderr == "", first.stderr
    assert second.returncode == 0 and second.stderr == "", second.stderr
    out1, out2 = first.stdout, second.stdout
    assert "owner role dealer_owner: created (NOLOGIN)" in out1 and "owner role dealer_owner: exists" in out2
    assert "database dealer: created" in out1 and "database dealer: exists" in out2
    assert "journal schema: created" in out1 and "journal schema: existing" in out2
    jid = re.findall(r"journal id (\w+)", out1)
    assert jid and jid == re.findall(r"journal id (\w+)", out2)
    for node in NODES:
        role = cluster_cli.node_role(node)
        assert f"node {node}: login role {role} created" in out1 and "password new" in out1
        assert f"node {node}: login role {role} exists" in out2
    assert out2.count("password kept") == len(NODES) + 2 and "password new" not in out2
    port = studio.server.port
    assert studio.url("dealer_node_a") == (f"postgresql://dealer_node_a@127.0.0.1:{port}/dealer?sslmode=verify-full"
                                           f"&sslrootcert={studio.tmp}/etc/pg-ca.pem")
    # the files: each node's env (the URL of its own role) and every login's password line
    out = studio.tmp / "dealer-db"
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [f"{n}.env" for n in NODES] + [f"{n}.pgpass" for n in NODES] + ["dealer_audit.pgpass", "dealer_ops.pgpass"])
    assert oct(out.stat().st_mode & 0o777) == "0o700"
    env = env_file(out / "node-b.env")
    assert env == {"DEALER_SERVICE__NODE_ID": "node-b", "DEALER_SERVICE__JOURNAL_URL": studio.url("dealer_node_b")}
    line = (out / "node-b.pgpass").read_text().splitlines()[-1]
    host, p, db, user, password = line.split(":")
    assert (host, p, db, user) == ("127.0.0.1", str(port), "dealer", "dealer_node_b") and len(password) >= 24
    assert (out / "node-b.pgpass").stat().st_mode & 0o077 == 0
    for run in studio.inits:  # no password on the screen, ever
        for n in [*NODES, "dealer_audit", "dealer_ops"]:
            secret = (out / f"{n}.pgpass").read_text().splitlines()[-1].rsplit(":", 1)[1]
            assert secret not in run.stdout + run.stderr
    # step 3: the node host's check, as the node's role over verified TLS
    [check] = studio.checks
    assert (check.returncode, check.stderr) == (0, ""), check.stderr
    assert check.stdout.strip().endswith("ok"), check.stdout
    # the installed node.env is the one init wrote, and loads into the node's configuration
    assert (studio.tmp / "etc" / "node.env").read_text() == (out / "node-a.env").read_text()


def test_roles_sql_is_what_init_applies() -> None:
    text = (ROOT / "deploy" / "postgresql" / "roles.sql").read_text()
    assert text.endswith(cluster_cli.ROLES_SQL), "deploy/postgresql/roles.sql differs from dealer cluster init's"
    assert all(line.startswith("--") or not line.strip() for line in text[: -len(cluster_cli.ROLES_SQL)].splitlines())


async def test_nodes_append_and_cannot_rewrite_the_auditor_reads(studio: Studio,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    settings = studio.settings("node-a", monkeypatch)
    assert settings.service.node_id == "node-a"
    assert settings.service.journal_url == studio.url("dealer_node_a")
    monkeypatch.setenv("PGPASSFILE", str(studio.tmp / "var" / ".pgpass"))  # the unit's PGPASSFILE
    m = lease_manager(settings, "s-write")
    await m.start()
    task = asyncio.create_task(m.run(_adopt, _drop, lambda t: True))
    journal = None
    try:
        await wait_until(lambda: set(m.held()) == {"TP1", "TP2", "SL1"}, timeout=20, what="node-a takes every table")
        journal = open_journal(settings)
        epoch = m.held()["TP1"]
        round_id = f"TP1-{journal.journal_id}-000001"
        await asyncio.to_thread(journal.commit, Batch(events=[("TP1", round_id, OpenRound(round_id=round_id)),
                                                              ("TP1", round_id, CloseBetting())],
                                                      epochs={"TP1": epoch}))
        assert journal.count("TP1") == 2
    finally:
        if journal is not None:
            journal.close()
        await m.release_all()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await m.close()
    node = settings.service.journal_url
    assert node is not None
    for stmt in ("UPDATE events SET body = body", "DELETE FROM events", "TRUNCATE events", "DELETE FROM meta",
                 "UPDATE commands SET digest = digest", "CREATE TABLE mine (x int)", "DELETE FROM cluster_log",
                 "INSERT INTO pins VALUES ('TP1', 'node-a', now(), 'me', 'x')"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            with psycopg.connect(node, autocommit=True) as c:
                c.execute(stmt)
    # TLS only: the same login without it is refused by pg_hba
    with pytest.raises(psycopg.OperationalError, match="no pg_hba.conf entry|reject"):
        psycopg.connect(node.split("?")[0] + "?sslmode=disable", connect_timeout=5).close()
    # a wrong password is refused (the server asks for the password: no trust anywhere)
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(node, password="guess", connect_timeout=5).close()
    # the auditor: reads and verifies every chain, writes nothing
    monkeypatch.setenv("PGPASSFILE", str(studio.pgpass("dealer_audit")))
    ro = PgJournal.open_read_only(studio.url("dealer_audit"))
    try:
        assert ro.count() >= 2 and ro.verify_chain().ok
    finally:
        ro.close()
    for stmt in ("INSERT INTO outbox (key, topic, payload, table_id, round_id, created_at) VALUES "
                 "('k', 't', 'p', 'TP1', 'r', 0)", "UPDATE leases SET epoch = epoch + 1", "DELETE FROM pins"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            with psycopg.connect(studio.url("dealer_audit"), autocommit=True) as c:
                c.execute(stmt)


async def _adopt(table: str, epoch: int) -> None:
    return None


async def _drop(table: str, reason: str) -> None:
    return None


def lease_manager(settings: Settings, session: str) -> LeaseManager:
    """The node's lease loop as dealer/edge/runner.py builds it."""
    url = settings.service.journal_url
    assert url is not None
    return LeaseManager(url, node_id=settings.service.node_id, session=session,
                        tables=[t.id for t in settings.tables],
                        preferred={t.id: list(t.preferred_nodes) for t in settings.tables if t.preferred_nodes},
                        cluster=settings.cluster)


async def test_a_killed_node_is_down_by_the_time_its_tables_have_moved(studio: Studio,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    a_settings, b_settings = studio.settings("node-a", monkeypatch), studio.settings("node-b", monkeypatch)
    assert a_settings.cluster.lease_seconds == 4  # the shipped studio.toml's
    monkeypatch.setenv("PGPASSFILE", str(studio.pgpass("node-a", "node-b")))
    ops = {"PGPASSFILE": str(studio.pgpass("dealer_ops")), "DEALER_SERVICE__JOURNAL_URL": studio.url("dealer_ops")}

    async def status() -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """The operator's `dealer cluster status --config /etc/dealer/studio.toml` (off the event loop:
        the nodes keep beating meanwhile): the whole answer, and its nodes by name."""
        done = await asyncio.to_thread(studio.dealer, "dealer cluster status --config /etc/dealer/studio.toml --json",
                                       **ops)
        assert done.returncode == 0, done.stderr
        whole = json.loads(done.stdout)
        return whole, {n["node"]: n for n in whole["nodes"]}

    a, b = lease_manager(a_settings, "s-a"), lease_manager(b_settings, "s-b")
    tasks = []
    try:
        for m in (a, b):
            await m.start()
            tasks.append(asyncio.create_task(m.run(_adopt, _drop, lambda t: True)))
        await wait_until(lambda: a.held() and b.held() and len(a.held()) + len(b.held()) == 3, timeout=30,
                         what="the tables split between node-a and node-b")
        whole, st = await status()
        assert whole["lease_seconds"] == 4 and whole["lease_seconds_from"] == "config"
        assert st["node-a"]["state"] == st["node-b"]["state"] == "live", st
        # kill -9 node-a: its loop stops dead, nothing released, its heartbeat stops
        tasks[0].cancel()
        await asyncio.gather(tasks[0], return_exceptions=True)
        await wait_until(lambda: len(b.held()) == 3, timeout=30, what="node-b takes node-a's tables")
        _, st = await status()
        assert st["node-b"]["state"] == "live" and st["node-b"]["holds"] == 3, st
        assert st["node-a"]["state"] == "down" and not st["node-a"]["live"] and st["node-a"]["holds"] == 0, st
        text = await asyncio.to_thread(studio.dealer, "dealer cluster status --config /etc/dealer/studio.toml", **ops)
        assert re.search(r"^node-a +DOWN ", text.stdout, flags=re.M) and re.search(r"^node-b +yes ", text.stdout,
                                                                                   flags=re.M), text.stdout
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await b.release_all()
        for m in (a, b):
            await m.close()


def test_a_stale_or_superseded_node_is_down(pg: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Rows as a killed node leaves them: silent past the lease, or (a window given too long)
    silent past a renewal while other nodes took tables after its last heartbeat."""
    from dealer.cli.main import main

    PgJournal(pg, node_id="x").close()
    with psycopg.connect(pg, autocommit=True) as c:
        c.execute("INSERT INTO nodes (node, session, started_at, heartbeat_at, leaving) VALUES "
                  "('busy', 's1', now(), clock_timestamp(), false), "
                  "('idle', 's2', now(), clock_timestamp() - interval '0.2 s', false), "
                  "('quiet', 's3', now(), clock_timestamp() - interval '6 s', false), "
                  "('taken', 's4', now(), clock_timestamp() - interval '9 s', false), "
                  "('bye', 's5', now(), clock_timestamp(), true)")
        # busy took T1 long ago and T2 8 s ago, after taken's last heartbeat (and before quiet's)
        c.execute("INSERT INTO leases VALUES ('T1', 'busy', 2, clock_timestamp() + interval '4 s', "
                  "clock_timestamp() - interval '20 s'), ('T2', 'busy', 5, clock_timestamp() + interval '4 s', "
                  "clock_timestamp() - interval '8 s')")

    def states(*extra: str) -> dict[str, str]:
        assert main(["cluster", "status", "--journal", pg, "--json", *extra]) == 0
        st = json.loads(capsys.readouterr().out)
        assert all(n["live"] == (n["state"] == "live") for n in st["nodes"])
        return {n["node"]: n["state"] for n in st["nodes"]}

    # the lease the held leases show (busy's: expires_at - its heartbeat = 4 s): silent 6 s is down
    assert states() == {"busy": "live", "bye": "leaving", "idle": "live", "quiet": "down", "taken": "down"}
    # a window given too long: quiet passes, but taken holds nothing, missed its renewals (of the
    # lease the leases show) and its tables went to busy after its last heartbeat: down
    assert states("--lease-seconds", "30") == {"busy": "live", "bye": "leaving", "idle": "live", "quiet": "live",
                                               "taken": "down"}
    assert main(["cluster", "status", "--journal", pg, "--lease-seconds", "30"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^taken +DOWN .*other nodes took tables", out, flags=re.M), out


def test_bad_input_is_one_line_and_exit_2(studio: Studio, tmp_path: Path) -> None:
    [init] = [line for line in setup_blocks()[1] if line.startswith("dealer cluster init")]
    unreachable = init.replace("db.studio.lan", f"127.0.0.1:{free_port()}")
    for line, env, says in [
        (init, {"PGPASSWORD": "wrong"}, "password authentication failed"),
        (unreachable, {"PGPASSWORD": ADMIN_PASSWORD}, "cannot connect to the database as the admin"),
        (init.replace("--node node-b", "--node 'node b'"), {}, "is not a node id"),
        (init.replace("--auditor dealer_audit", "--auditor 'Robert); DROP TABLE events;--'"), {},
         "is not a plain role name"),
        (init.replace("--node node-c", "--node node_a"), {}, "would share the login role dealer_node_a"),
        (init.replace('"postgresql://postgres@db.studio.lan/postgres', '"mysql://db.studio.lan/postgres'), {},
         "must be a postgresql:// URL"),
        (init.replace(" --out /root/dealer-db", ""), {}, "give --out DIR"),
    ]:
        done = studio.dealer(line.replace("/root/dealer-db", str(tmp_path / "out")), **env)
        assert done.returncode == 2, (line, done.stdout, done.stderr)
        assert done.stderr.count("\n") == 1 and says in done.stderr, (line, done.stderr)
        assert done.stderr.startswith("dealer cluster init: ") and "Traceback" not in done.stderr
        assert ADMIN_PASSWORD not in done.stderr
    # a role that may not create roles and databases is told so
    with psycopg.connect(studio.url("dealer_ops"), password=(studio.tmp / "dealer-db" / "dealer_ops.pgpass")
                         .read_text().splitlines()[-1].rsplit(":", 1)[1]) as c:
        assert c.execute("SELECT current_user").fetchone() == ("dealer_ops",)
    ops = init.replace("postgres@db.studio.lan/postgres", "dealer_ops@db.studio.lan/dealer")
    done = studio.dealer(ops.replace("/root/dealer-db", str(tmp_path / "out")),
                         PGPASSFILE=str(studio.pgpass("dealer_ops")))
    assert done.returncode == 2 and "may not do this" in done.stderr and done.stderr.count("\n") == 1, done.stderr


def test_a_createrole_createdb_admin_bootstraps_too(tmp_path: Path) -> None:
    """Not a superuser: CREATEROLE and CREATEDB are enough (the owner is granted to it to create
    the database for it); and ``python -m dealer.edge.journals init`` still creates a schema."""
    server = PgServer()
    try:
        server.start()
        with psycopg.connect(server.url(), autocommit=True) as c:
            c.execute("CREATE ROLE dba LOGIN CREATEROLE CREATEDB")
        admin = f"postgresql://dba@127.0.0.1:{server.port}/postgres"
        argv = [sys.executable, "-m", "dealer", "cluster", "init", "--admin-url", admin, "--node", "host-b-1",
                "--node", "host-b-2", "--sslmode", "disable", "--out", str(tmp_path / "out"), "--json"]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DEALER_", "PG"))} | {"PYTHONPATH": str(ROOT)}
        runs = [subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120) for _ in (1, 2)]
        for r in runs:
            assert r.returncode == 0 and r.stderr == "", r.stderr
        first, second = (json.loads(r.stdout) for r in runs)
        assert [s.get("done") for s in first["steps"]] == ["created", "created", "created", None, "created",
                                                           "created"]
        assert [s.get("done") for s in second["steps"]] == ["exists", "exists", "existing", None, "exists", "exists"]
        assert first["steps"][3]["created"] == list(cluster_cli.GROUPS) and second["steps"][3]["created"] == []
        assert [s["password"] for s in second["steps"][4:]] == ["kept", "kept"]
        owners = server.psql("dealer", "SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = 'public'")
        assert owners.split() == ["dealer_owner"]
        env_b = env_file(tmp_path / "out" / "host-b-2.env")
        assert env_b["DEALER_SERVICE__NODE_ID"] == "host-b-2"
        url = env_b["DEALER_SERVICE__JOURNAL_URL"]
        assert url == f"postgresql://dealer_host_b_2@127.0.0.1:{server.port}/dealer?sslmode=disable"
        with psycopg.connect(url, autocommit=True) as c:
            assert c.execute("SELECT pg_has_role('dealer_node', 'MEMBER'), has_table_privilege('events', 'INSERT'), "
                             "has_table_privilege('events', 'UPDATE')").fetchone() == (True, True, False)
        # the module entry keeps working (an owner creating a schema in a database of its own)
        server.create_database("other")
        done = subprocess.run([sys.executable, "-m", "dealer.edge.journals", "init", server.url("other")], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and json.loads(done.stdout)["source"] == "created", done.stderr
    finally:
        server.cleanup()
