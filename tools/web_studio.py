"""A whole simulated studio with its screens: the web demo and the browser tests bring it up here.

In a folder of its own it writes a config with one table of each game (Teen Patti 20-20,
Sevenluck, Seven-Card Stud, Seotda, Matgo), a supervisor with a key file made by ``dealer
supervisor keygen``, and starts, each as its own process with its own role's broker login:

* Mosquitto with the deployed configuration (``deploy/mosquitto/mosquitto.conf``: TLS, passwords,
  no anonymous clients) and the ACL ``dealer deploy acl`` renders, plus one rig user for the
  simulated shoes, dealers and players (docs/rig.md);
* ``dealer run`` (the backend), ``dealer settle`` (settlement), ``dealer simulate`` (shoes on
  pseudo-terminals, dealers and players, with faults: no-reads, duplicate and foreign cards) and
  ``dealer web`` (the screens, forwarding to the broker's TLS listener).

Every child (Mosquitto too) runs in its own process group, so a Ctrl-C reaches only the launcher,
which stops them in order, and dies with the process that started it (``die_with_parent``).
``kill_backend``/``start_backend``, ``stop_broker``/``start_broker`` and ``publish_raw`` are what
the browser tests' chaos needs."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import quote

from simulators.procs import die_with_parent

ROOT = Path(__file__).resolve().parent.parent
#: One table of each game: (table id, game, extra TOML for the table).
TABLES: tuple[tuple[str, str, str], ...] = (
    ("TP1", "teen-patti", ""),
    ("SL1", "sevenluck", "[tables.options]\nseats = 3\n"),
    ("ST1", "stud", ""),
    ("SE1", "seotda", ""),
    ("MG1", "matgo", ""),
)
SUPERVISOR = "sup-pit"
RIG_USER = "rig"


class StudioError(RuntimeError):
    """The studio could not be brought up: one line saying why."""


class BrokerAddress(NamedTuple):
    """Where the studio's Mosquitto listens (every part of the studio uses the TLS listener)."""

    host: str
    port: int  #: the TLS listener (``url``), CA ``ca_file``
    plain_port: int  #: the plain loopback listener (same passwords and ACL, no TLS)
    url: str
    ca_file: Path


class WebStudio:
    """The studio (see the module doc). Use as a context manager, or call ``start``/``close``."""

    def __init__(self, folder: Path | None = None, *, web_port: int = 0, faults: float = 0.05, seed: int = 7,
                 deal_interval: float = 0.6, betting_seconds: float = 6.0, rounds: int | None = None) -> None:
        self._own = folder is None
        self.dir = Path(tempfile.mkdtemp(prefix="dealer-studio-")) if folder is None else folder
        self.dir.mkdir(parents=True, exist_ok=True)
        self.web_port, self.faults, self.seed = web_port, faults, seed
        self.deal_interval, self.betting_seconds, self.rounds = deal_interval, betting_seconds, rounds
        self.tables = {tid: game for tid, game, _ in TABLES}
        users = ["dealer-backend", "settlement", "ops", "player-platform", f"supervisor-{SUPERVISOR}", RIG_USER]
        users += [f"station-{tid}" for tid in self.tables]
        self.credentials = {u: secrets.token_urlsafe(12) for u in users}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.mosquitto: Any = None  #: the broker process (``simulators.secure_broker.SecureMosquitto``)
        self.url = ""
        self.config_path = self.dir / "studio.toml"
        self.supervisor_key_file = self.dir / f"{SUPERVISOR}.key"
        self.journal_path = self.dir / "journal.sqlite"

    # -- bring-up -----------------------------------------------------------------------------------

    def __enter__(self) -> "WebStudio":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Bring the studio up (about 5 s); on any failure everything started so far is stopped."""
        if self.url:
            raise StudioError("the studio is already started")
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    def _start(self) -> None:
        from dealer.edge.config import load_settings
        from simulators.secure_broker import SecureMosquitto, make_test_ca
        from tools.deploy import render_acl

        for tool in ("mosquitto", "mosquitto_passwd", "openssl"):
            if not (shutil.which(tool) or Path("/usr/sbin", tool).exists()):
                raise StudioError(f"{tool} is not installed (Debian packages mosquitto and openssl; scripts/demo-web "
                                  "and scripts/test install them)")
        for user, password in self.credentials.items():
            self._secret(f"{user}.pw", password + "\n")
        self._cli("supervisor", "keygen", "--out", str(self.supervisor_key_file))
        certs = make_test_ca(self.dir / "tls")
        self._write_config("mqtts://127.0.0.1:1")  # a draft: the ACL needs the tables, the config the ports
        acl = render_acl(load_settings(self.config_path), source="the web studio") + (
            "\n# The simulated rig (shoes, dealers, players: dealer simulate); not a production role.\n"
            f"user {RIG_USER}\ntopic readwrite studio/v1/tables/#\n")
        work = self.dir / "broker"
        work.mkdir(exist_ok=True)
        self.mosquitto = SecureMosquitto(work, certs, self.credentials, acl, tied=True)
        try:
            self.mosquitto.start()
        except RuntimeError as exc:
            raise StudioError(" ".join(str(exc).split())[:500]) from None
        self._write_config(self.mosquitto.tls_url)
        ledger = self.dir / "ledger.sqlite"
        self.start_backend()
        self._spawn("settle", "settle", "--config", self.config_path, "--ledger", ledger,
                    *self._login("settlement"))
        more = ["--rounds", str(self.rounds)] if self.rounds else []
        self._spawn("simulate", "simulate", "--config", self.config_path, "--ledger", ledger, "--seed", str(self.seed),
                    "--faults", str(self.faults), "--deal-interval", str(self.deal_interval), *more, *self._login(RIG_USER))
        self._spawn("web", "web", "--config", self.config_path, "--listen", f"127.0.0.1:{self.web_port}")
        line = self._first_line("web", timeout=30)
        self.url = json.loads(line)["url"]

    def _write_config(self, broker_url: str) -> None:
        tables = "".join(f"""
[[tables]]
id = "{tid}"
game = "{game}"
betting_seconds = {self.betting_seconds}
pause_seconds = 1.5
decision_seconds = 8
action_seconds = 8
{extra}
[tables.scanner]
kind = "serial"
port = "{self.dir / 'dev' / f'shoe-{tid}'}"
reader_id = "SC{i}"
heartbeat_timeout = 3
""" for i, (tid, game, extra) in enumerate(TABLES, start=1))
        (self.dir / "dev").mkdir(exist_ok=True)
        self.config_path.write_text(f"""# The web studio (tools/web_studio.py): one table of each game, simulated.
[service]
node_id = "studio-1"
journal_path = "{self.journal_path}"
metrics_enabled = false
log_level = "warning"
result_resend_seconds = 2

[mqtt]
url = "{broker_url}"
username = "dealer-backend"
password_file = "{self.dir / 'dealer-backend.pw'}"
ca_file = "{self.dir / 'tls' / 'ca.crt'}"

[web]
listen = "127.0.0.1:{self.web_port}"

[[security.supervisors]]
id = "{SUPERVISOR}"
key_files = ["{self.supervisor_key_file}"]
{tables}""")

    def _login(self, user: str) -> list[str]:
        return ["--username", user, "--password-file", str(self.dir / f"{user}.pw"),
                "--ca-file", str(self.dir / "tls" / "ca.crt")]

    def _secret(self, name: str, text: str) -> Path:
        p = self.dir / name
        p.write_text(text)
        p.chmod(0o600)
        return p

    # -- processes ------------------------------------------------------------------------------------

    def _spawn(self, name: str, *args: str | Path) -> subprocess.Popen[bytes]:
        env = os.environ | {"PYTHONPATH": str(ROOT)}
        out = (self.dir / f"{name}.out").open("ab")
        err = (self.dir / f"{name}.err").open("ab")
        proc = subprocess.Popen([sys.executable, "-m", "dealer", *map(str, args)], cwd=ROOT, env=env, stdout=out,
                                stderr=err, stdin=subprocess.DEVNULL, preexec_fn=die_with_parent, process_group=0)
        out.close()
        err.close()
        self.procs[name] = proc
        return proc

    def _first_line(self, name: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        path = self.dir / f"{name}.out"
        while time.monotonic() < deadline:
            text = path.read_text() if path.exists() else ""
            if text.strip():
                return text.splitlines()[0]
            if self.procs[name].poll() is not None:
                raise StudioError(f"dealer {name} exited ({self.procs[name].returncode}): {self.stderr(name)[-500:]}")
            time.sleep(0.1)
        raise StudioError(f"dealer {name} did not start within {timeout:g} s: {self.stderr(name)[-500:]}")

    def _cli(self, *args: str) -> None:
        out = subprocess.run([sys.executable, "-m", "dealer", *args], cwd=ROOT, capture_output=True, text=True,
                             env=os.environ | {"PYTHONPATH": str(ROOT)}, timeout=60)
        if out.returncode != 0:
            raise StudioError(f"dealer {' '.join(args[:2])}: {out.stderr.strip()[-300:]}")

    def stderr(self, name: str) -> str:
        p = self.dir / f"{name}.err"
        return p.read_text(errors="replace") if p.exists() else ""

    def lines(self, name: str) -> list[dict[str, Any]]:
        p = self.dir / f"{name}.out"
        out = []
        for line in (p.read_text().splitlines() if p.exists() else []):
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
        return out

    def rounds_finished(self) -> dict[str, int]:
        """Rounds finished so far per table (``dealer simulate``'s ``round_finished`` lines)."""
        done = dict.fromkeys(self.tables, 0)
        for x in self.lines("simulate"):
            if x.get("event") == "round_finished" and x.get("table_id") in done:
                done[x["table_id"]] += 1
        return done

    def wait_rounds(self, n: int = 1, timeout: float = 120) -> dict[str, int]:
        """Wait until every table finished ``n`` rounds; StudioError names the laggards after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            done = self.rounds_finished()
            if all(v >= n for v in done.values()):
                return done
            for name, proc in self.procs.items():
                if proc.poll() is not None and not (name == "simulate" and self.rounds):
                    raise StudioError(f"dealer {name} exited ({proc.returncode}): {self.stderr(name)[-500:]}")
            if time.monotonic() > deadline:
                raise StudioError(f"not every table finished {n} round(s) within {timeout:g} s: {done}")
            time.sleep(0.25)

    @property
    def broker(self) -> BrokerAddress:
        m = self.mosquitto
        if m is None:
            raise StudioError("the studio is not started")
        return BrokerAddress("127.0.0.1", m.tls_port, m.plain_port, m.tls_url, m.ca_file)

    def start_backend(self) -> None:
        """Start ``dealer run`` (again, after ``kill_backend``: same config, same journal)."""
        proc = self.procs.get("backend")
        if proc is not None and proc.poll() is None:
            raise StudioError("dealer run is already running")
        self._spawn("backend", "run", "--config", self.config_path)

    def kill_backend(self) -> None:
        """SIGKILL ``dealer run``: the broker fires its last will, every retained message goes stale."""
        proc = self.procs.pop("backend")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)

    def stop_broker(self) -> None:
        """Stop Mosquitto (SIGTERM); ``start_broker`` brings it back on the same ports and files."""
        self.mosquitto.stop()

    def start_broker(self) -> None:
        self.mosquitto.start()

    def publish_raw(self, topic: str, payload: bytes, retain: bool = False, *, user: str = "dealer-backend",
                    password: str | None = None) -> None:
        """One QoS 1 publish as ``user`` (its studio password unless ``password``), over TLS, e.g. a
        malformed or oversized message on a topic a page reads. The broker's ACL applies: a publish
        it refuses is acknowledged and dropped (MQTT 3.1.1)."""
        import paho.mqtt.client as paho

        from drivers.mqtt import make_tls_context

        import threading

        connected: list[Any] = []
        ready = threading.Event()
        c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=f"raw-{secrets.token_hex(4)}")
        c.username_pw_set(user, self.credentials[user] if password is None else password)
        c.tls_set_context(make_tls_context(self.broker.ca_file))
        c.on_connect = lambda _c, _u, _f, reason, _p: (connected.append(reason), ready.set())
        c.connect("127.0.0.1", self.broker.port, keepalive=10)
        c.loop_start()
        try:
            if not ready.wait(10) or connected[0].is_failure:
                raise StudioError(f"the broker did not take {user}'s login: {connected[0] if connected else 'no answer'}")
            info = c.publish(topic, payload, qos=1, retain=retain)
            info.wait_for_publish(timeout=10)
            if not info.is_published():
                raise StudioError(f"publish to {topic} not acknowledged")
        finally:
            c.disconnect()
            c.loop_stop()

    # -- addresses for people ----------------------------------------------------------------------------

    def station_url(self, table: str) -> str:
        return f"{self.url}/station?table={table}"

    @property
    def floor_url(self) -> str:
        return f"{self.url}/floor"

    def login_fragment(self, user: str) -> str:
        return f"#user={quote(user)}&password={quote(self.credentials[user])}"

    def station_login_url(self, table: str) -> str:
        return self.station_url(table) + self.login_fragment(f"station-{table}")

    def floor_login_url(self, user: str = "ops") -> str:
        return self.floor_url + self.login_fragment(user)

    # -- stop ------------------------------------------------------------------------------------------------

    def close(self) -> None:
        for name in ("simulate", "web", "settle", "backend"):
            proc = self.procs.pop(name, None)
            if proc is None or proc.poll() is not None:
                continue
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self.mosquitto is not None and self.mosquitto.proc is not None:
            self.mosquitto.stop()
        if self._own:
            shutil.rmtree(self.dir, ignore_errors=True)


# -- `dealer demo-web` ------------------------------------------------------------------------------------

WHAT_YOU_SEE = """\
What you will see: five tables dealing by themselves (Teen Patti 20-20, Sevenluck, Seven-Card
Stud, Seotda, Matgo), with faults: a station shows the position to deal in big letters, a
RESCAN with its reason after a no-read or a duplicate card, face-down cards as backs, the
countdowns, each result and the last rounds. The floor shows every table; tap one for its
timeline, last rounds and per-dealer figures. Log a dealer on at a station (LOG ON). To act as
the pit boss, open the supervisor's floor address and load the key file printed above: VOID,
PAUSE, RESUME, CLOSE, REOPEN are signed in the browser and the answer is shown. Ctrl-C stops it."""


def _cmd_demo_web(args: Any) -> int:
    if not 0 <= args.faults <= 1 or not 0 < args.deal_interval <= 60:
        print("dealer demo-web: --faults is a probability from 0 to 1, --deal-interval from 0 to 60 seconds",
              file=sys.stderr)
        return 2
    try:
        studio = WebStudio(Path(args.folder) if args.folder else None, web_port=args.port, faults=args.faults,
                           seed=args.seed, deal_interval=args.deal_interval, rounds=args.rounds)
        studio.start()  # stops whatever it started when it fails
    except (StudioError, OSError, RuntimeError) as exc:
        print(f"dealer demo-web: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C while starting: everything is stopped already
        return 0
    stop = {"now": False}

    def _stop(*_: Any) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        print(f"Screens of a simulated studio (files in {studio.dir}):\n")
        for tid, game in studio.tables.items():
            print(f"  station {tid} ({game}): {studio.station_login_url(tid)}")
        print(f"\n  floor (ops, read only):  {studio.floor_login_url('ops')}")
        print(f"  floor (supervisor):      {studio.floor_login_url(f'supervisor-{SUPERVISOR}')}")
        print(f"  supervisor's key file:   {studio.supervisor_key_file}\n")
        print(WHAT_YOU_SEE, flush=True)
        while not stop["now"]:
            for name in ("backend", "settle", "web"):
                proc = studio.procs.get(name)
                if proc is not None and proc.poll() is not None and not stop["now"]:
                    print(f"dealer demo-web: dealer {name} exited ({proc.returncode}): "
                          f"{' '.join(studio.stderr(name).split())[-300:]}", file=sys.stderr)
                    return 1
            sim = studio.procs.get("simulate")
            if args.rounds and sim is not None and sim.poll() is not None:
                print(f"{args.rounds} round{'' if args.rounds == 1 else 's'} played at every table.")
                break
            time.sleep(0.5)
    finally:
        studio.close()
    return 0


def register(sub: Any) -> None:
    from dealer.cli.args import int_range

    p = sub.add_parser("demo-web", help="a simulated studio of five tables with the dealer-station and pit-boss "
                       "screens: prints their addresses (needs mosquitto; scripts/demo-web installs it)")
    p.add_argument("--port", type=int_range(0, 65535), default=8080, help="the screens' port on 127.0.0.1 (default 8080; "
                   "0: any free port)")
    p.add_argument("--faults", type=float, default=0.05, metavar="P", help="the simulated shoes' and dealers' fault "
                   "probability (default 0.05)")
    p.add_argument("--deal-interval", type=float, default=0.8, metavar="SECONDS",
                   help="the simulated dealers' pace, seconds per card (default 0.8: a person can watch)")
    p.add_argument("--seed", type=int, default=7, help="seed of the shuffles, bets and faults (default 7)")
    p.add_argument("--rounds", type=int_range(1, 1_000_000), help="stop once every table played N rounds "
                   "(default: until Ctrl-C)")
    p.add_argument("--folder", metavar="DIR", help="keep the studio's files (config, journal, logs, keys) here "
                   "(default: a temporary folder, removed at the end)")
    p.set_defaults(func=_cmd_demo_web)


__all__ = ["RIG_USER", "SUPERVISOR", "TABLES", "BrokerAddress", "StudioError", "WebStudio", "register"]
