"""A private PostgreSQL server on a free loopback port (tests, the soak and benchmarks).

Tests kill (SIGKILL to the whole process group), pause (SIGSTOP) and restart it to inject
faults, so it runs as a child of this process in its own session, never as the machine's
service. Durability is as in production (fsync on, synchronous commit): a test that kills it
checks what a real crash keeps.

PostgreSQL refuses to run as root: when this process is root the cluster belongs to the
``postgres`` user (created by Debian's package) and runs under ``runuser``. The data directory
lives in its own ``mkdtemp`` directory, not under a test's tmp_path, which root keeps 0700.
``initdb`` runs once per process (about a second) and later servers copy that template.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from simulators.broker import free_port

_TEMPLATE: Path | None = None


def pg_bin(name: str) -> str:
    """A PostgreSQL server program (Debian keeps them out of PATH, in /usr/lib/postgresql/N/bin)."""
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(p.split("/")[4]))
    if found:
        return found[-1]
    which = shutil.which(name)
    if which:
        return which
    raise RuntimeError(f"PostgreSQL's {name} is not installed (Debian package 'postgresql'); scripts/test installs it")


def _owner() -> tuple[dict[str, object], int, int]:
    """(Popen arguments, uid, gid) to run the server as: ``postgres`` when we are root. The
    server is started as our own child (no runuser in between), so we reap it ourselves and a
    killed postmaster never lingers as a zombie that keeps its lock file "in use"."""
    if os.geteuid() != 0:
        return {}, os.geteuid(), os.getegid()
    try:
        pw = pwd.getpwnam("postgres")
    except KeyError:
        raise RuntimeError("running as root needs the 'postgres' user (Debian package 'postgresql')") from None
    return {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}, pw.pw_uid, pw.pw_gid


def _chown_tree(path: Path, uid: int, gid: int) -> None:
    if os.geteuid() != 0:
        return
    for root, dirs, files in os.walk(path):
        os.chown(root, uid, gid)
        for n in dirs + files:
            os.lchown(os.path.join(root, n), uid, gid)


def _template() -> Path:
    """An initdb'ed data directory, made once per process and copied for each server."""
    global _TEMPLATE
    if _TEMPLATE is not None and (_TEMPLATE / "PG_VERSION").exists():
        return _TEMPLATE
    as_owner, uid, gid = _owner()
    base = Path(tempfile.mkdtemp(prefix="dealer-pg-template-"))
    os.chmod(base, 0o755)
    data = base / "data"
    data.mkdir()
    _chown_tree(base, uid, gid)
    out = subprocess.run([pg_bin("initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
                                   "-E", "UTF8", "--locale=C.UTF-8", "--no-instructions"],
                         capture_output=True, text=True, cwd=base, **as_owner)  # type: ignore[call-overload]  # as_owner holds Popen's user/group keywords as dict[str, object]
    if out.returncode != 0:
        raise RuntimeError(f"initdb failed: {out.stderr.strip() or out.stdout.strip()}")
    _TEMPLATE = data
    return data


class PgServer:
    """One PostgreSQL cluster in its own directory on a free 127.0.0.1 port.

    ``url(db)`` is a libpq URL for database ``db`` (created by :meth:`create_database`; the
    cluster has ``postgres`` from the start). :meth:`kill`, :meth:`pause` / :meth:`resume` and
    :meth:`start` again (same port, same data) are the faults."""

    def __init__(self, directory: Path | None = None, *, port: int | None = None) -> None:
        self.port = port or free_port()
        self.base = Path(tempfile.mkdtemp(prefix="dealer-pg-", dir=str(directory) if directory else None))
        os.chmod(self.base, 0o755)
        if directory is not None:  # the parent (a test's tmp_path) must be traversable by postgres
            p = Path(directory)
            while p != p.parent:
                if os.geteuid() == 0 and p.stat().st_mode & 0o011 == 0:
                    os.chmod(p, p.stat().st_mode | 0o011)
                p = p.parent
        self.data = self.base / "data"
        shutil.copytree(_template(), self.data, symlinks=True)
        _, uid, gid = _owner()
        _chown_tree(self.base, uid, gid)
        os.chmod(self.data, 0o700)
        self.log_path = self.base / "server.log"
        # its Unix socket in a short directory of its own: a socket path is at most 107 bytes, and
        # a test's tmp_path (under pytest-xdist: .../popen-gw2/test_<long name>/...) is longer
        self.socket_dir = Path(tempfile.mkdtemp(prefix="pgs-"))
        if os.geteuid() == 0:
            os.chown(self.socket_dir, uid, gid)
        self.proc: subprocess.Popen[bytes] | None = None

    def url(self, db: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{db}"

    def start(self, timeout: float = 30.0) -> None:
        """Start the server and return once it accepts connections (RuntimeError with its log if not)."""
        as_owner, _, _ = _owner()
        logf = open(self.log_path, "ab")
        self.proc = subprocess.Popen(  # type: ignore[call-overload]  # as_owner holds Popen's user/group keywords as dict[str, object]
            [pg_bin("postgres"), "-D", str(self.data), "-p", str(self.port), "-k", str(self.socket_dir),
                      "-c", "listen_addresses=127.0.0.1", "-c", "fsync=on", "-c", "synchronous_commit=on",
                      "-c", "max_connections=200", "-c", "shared_buffers=32MB"],
            stdout=logf, stderr=subprocess.STDOUT, start_new_session=True, cwd=self.base, **as_owner)
        logf.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited ({self.proc.returncode}): {self.log_tail()}")
            if self._ready():
                return
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"postgres did not accept connections on port {self.port} in {timeout:.0f} s: "
                           f"{self.log_tail()}")

    def _ready(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                pass
        except OSError:
            return False
        out = subprocess.run([pg_bin("pg_isready"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres"],
                             capture_output=True)
        return out.returncode == 0

    def log_tail(self, n: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def create_database(self, name: str) -> str:
        """Create database ``name`` (fresh) and return its URL."""
        out = subprocess.run([pg_bin("psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d",
                              "postgres", "-v", "ON_ERROR_STOP=1", "-qc", f'CREATE DATABASE "{name}"'],
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"cannot create database {name}: {out.stderr.strip()}")
        return self.url(name)

    def psql(self, db: str, sql: str) -> str:
        """Run SQL as the superuser (tests that tamper with the journal or read it behind the backend)."""
        out = subprocess.run([pg_bin("psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", db,
                              "-v", "ON_ERROR_STOP=1", "-qAtc", sql], capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(out.stderr.strip())
        return out.stdout

    def _children(self) -> list[int]:
        """The postmaster's children (backends, checkpointer, walwriter ...): each calls
        setsid() at birth, so they are not in the postmaster's process group."""
        assert self.proc is not None
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == self.proc.pid:
                found.append(int(entry))
        return found

    def cpu_seconds(self) -> float | None:
        """CPU time (user + system) the server has used so far: the postmaster's own, its
        reaped children's (a connection that ended) and its live children's (benchmarks count
        the database beside the backend on the same machine). None: not running."""
        if self.proc is None or self.proc.poll() is not None:
            return None
        tick = os.sysconf("SC_CLK_TCK")
        total = 0
        for pid, fields in ((self.proc.pid, slice(11, 15)), *((c, slice(11, 13)) for c in self._children())):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    total += sum(int(x) for x in f.read().rsplit(")", 1)[1].split()[fields])
            except (OSError, ValueError):
                continue
        return total / tick

    def _signal(self, sig: int) -> None:
        """Signal the postmaster (first: it forks no child meanwhile) and every child."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
            for pid in self._children():
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass

    def kill(self) -> None:
        """SIGKILL the postmaster and every backend (a crash: committed rows survive, nothing else)."""
        if self.proc is None:
            return
        self._signal(signal.SIGCONT)
        self._signal(signal.SIGKILL)
        self.proc.wait()
        self.proc = None
        self._reap_orphans()

    def _reap_orphans(self) -> None:
        """Backends of a killed postmaster (its process group) may outlive it a moment: wait
        until none is left, or a restart finds the old shared memory still in use."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            out = subprocess.run(["pgrep", "-f", f"postgres -D {self.data} "], capture_output=True)
            if out.returncode != 0:
                return
            time.sleep(0.05)

    def stop(self) -> None:
        """A fast, clean shutdown (SIGINT: abort transactions, checkpoint, exit)."""
        if self.proc is None:
            return
        self._signal(signal.SIGCONT)
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGKILL)
            self.proc.wait()
        self.proc = None

    def pause(self) -> None:
        """SIGSTOP every server process: connections stay open, nothing answers."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def restart(self) -> None:
        self.kill()
        self.start()

    def cleanup(self) -> None:
        self.kill()
        shutil.rmtree(self.base, ignore_errors=True)
        shutil.rmtree(self.socket_dir, ignore_errors=True)


__all__ = ["PgServer", "pg_bin"]
