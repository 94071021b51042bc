"""Test harness: the deployed broker. A real Mosquitto on the deployed configuration with the
ACL that ``dealer deploy acl`` renders for two tables and one supervisor (a module-scoped
fixture, ``broker``), each user's password, and the role table of ``docs/mqtt-topics.md``
written out by hand: what each user may publish and read."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from dealer.edge import topics
from dealer.edge.config import Settings, load_settings
from simulators.secure_broker import SecureMosquitto, make_test_ca
from tools.deploy import render_acl

USERS = {
    "dealer-backend": "pw-backend", "settlement": "pw-settlement", "player-platform": "pw-platform",
    "ops": "pw-ops", "scanner-T1": "pw-scanner-1", "station-T1": "pw-station-1", "station-T2": "pw-station-2",
    "supervisor-sup-ana": "pw-sup-ana", "player-7": "pw-player-7", "auditor": "pw-auditor",
}

T = topics.table_topic

PROBED = {
    "T1/scanner": T("T1", "scanner"), "T2/scanner": T("T2", "scanner"),
    "T1/actions": T("T1", "actions"), "T1/station": T("T1", "station"), "T2/station": T("T2", "station"),
    "T1/supervisor": T("T1", "supervisor"), "T2/supervisor": T("T2", "supervisor"),
    "T1/events": T("T1", "events"), "T1/results": T("T1", "results"),
    "T1/results/ack": topics.results_ack("T1"),
    "T1/players/player-7": T("T1", "players/player-7"), "T1/players/player-8": T("T1", "players/player-8"),
    "status": topics.backend_status("n1"), "journal": topics.backend_journal("n1"),
    # the retained catch-up messages (dealer/edge/catchup.py); the state carries the prompt
    "T1/state": topics.state("T1"), "T2/state": topics.state("T2"),
    "T1/history": topics.history("T1"), "T2/history": topics.history("T2"),
    "T1/players/player-7/state": topics.player_state("T1", "player-7"),
    "T1/players/player-8/state": topics.player_state("T1", "player-8"),
    # retired by protocol 2 (docs/mqtt-topics.md §11): nobody may publish or read them any more
    "T1/prompts": T("T1", "prompts"), "T1/prompts/current": T("T1", "prompts/current"),
    "T2/prompts/current": T("T2", "prompts/current"),
}

#: Topics protocol 2 retired: no user may write or read them (not even the backend).
RETIRED = {"T1/prompts", "T1/prompts/current", "T2/prompts/current"}

CATCHUP = {"T1/state", "T2/state", "T1/history", "T2/history",
           "T1/players/player-7/state", "T1/players/player-8/state"}

OUT = {"T1/events", "T1/results", "T1/players/player-7", "T1/players/player-8", "status",
       "journal"} | CATCHUP

INBOUND = {"T1/scanner", "T2/scanner", "T1/actions", "T1/station", "T2/station", "T1/supervisor", "T2/supervisor",
           "T1/results/ack"}

#: The role table: what each user may publish.
MAY_WRITE: dict[str, set[str]] = {
    "dealer-backend": OUT,
    "settlement": {"T1/results/ack"},  # its acknowledgements, and nothing else
    "player-platform": {"T1/actions"},
    "ops": set(),
    "scanner-T1": {"T1/scanner"},
    "station-T1": {"T1/station"},
    "station-T2": {"T2/station"},
    "supervisor-sup-ana": {"T1/supervisor"},  # sup-ana may act on T1 only
    "player-7": set(),
}

#: ... and what each user may read.
MAY_READ: dict[str, set[str]] = {
    "dealer-backend": INBOUND | {"journal"},  # its own anchor, read back at start (dealer/edge/anchors.py)
    "settlement": {"T1/results"},
    "player-platform": {"T1/events", "status", "T1/state", "T2/state"},
    # never a player's topic (nor its state) nor a command topic
    "ops": {"T1/events", "T1/results", "status", "journal", "T1/state", "T2/state", "T1/history", "T2/history"},
    "scanner-T1": set(),
    "station-T1": {"T1/events", "T1/state", "T1/history", "status"},
    "station-T2": {"T2/state", "T2/history", "status"},  # nothing of T1
    "supervisor-sup-ana": {"T1/events", "status", "T1/state", "T1/history"},
    "player-7": {"T1/players/player-7", "T1/players/player-7/state"},  # its own, never player-8's
}


def studio(tmp: Path) -> Settings:
    tables = [{"id": tid, "game": "teen-patti", "scanner": {"kind": "mqtt", "reader_id": f"SC{i}"}}
              for i, tid in enumerate(("T1", "T2"), start=1)]
    key = tmp / "sup-ana.key"
    key.write_text("11" * 32 + "\n")
    key.chmod(0o600)
    return load_settings(service={"journal_path": tmp / "j.sqlite", "metrics_enabled": False},
                         tables=tables,
                         security={"supervisors": [{"id": "sup-ana", "key_files": [str(key)], "tables": ["T1"]}]})


def _tool(name: str) -> None:
    if not (shutil.which(name) or Path(f"/usr/sbin/{name}").exists() or Path(f"/usr/bin/{name}").exists()):
        pytest.fail(f"{name} is not installed: run scripts/test (it installs the Debian packages the tests need)")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureMosquitto]:
    for tool in ("mosquitto", "mosquitto_passwd", "openssl"):
        _tool(tool)
    base = tmp_path_factory.mktemp("roles-broker")
    certs = make_test_ca(base / "tls")
    work = base / "broker"
    work.mkdir()
    acl = render_acl(studio(base)) + "\n# test only: the observer of this test\nuser auditor\ntopic readwrite #\n"
    b = SecureMosquitto(work, certs, USERS, acl)
    b.start()
    yield b
    b.stop()
