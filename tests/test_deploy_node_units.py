"""deploy/cluster/dealer-node@.service: several backend processes on one host.

Each instance must come up as a node of its own: its own node id (the leases and the status
topic name it), its own MQTT client id (a second connection with the same id would take the
first one's session over) and its own metrics port (a second process could not bind it).
The unit's own ``Environment=`` lines, with systemd's ``%l`` and ``%i`` filled in, are applied to
the shipped studio configuration and loaded as ``dealer run`` loads it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dealer.edge.config import load_settings

ROOT = Path(__file__).resolve().parents[1]
UNIT = ROOT / "deploy" / "cluster" / "dealer-node@.service"
STUDIO = ROOT / "deploy" / "cluster" / "studio.toml"


def unit_environment(host: str, instance: str) -> dict[str, str]:
    """The unit's ``Environment=`` settings for one instance, specifiers filled in as systemd does."""
    env = {}
    for line in UNIT.read_text().splitlines():
        m = re.fullmatch(r"Environment=([A-Z0-9_]+)=(.*)", line.strip())
        if m:
            env[m[1]] = m[2].replace("%l", host).replace("%i", instance)
    return env


def test_each_instance_of_the_node_unit_is_a_node_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    # never the host's node.env (one node id for every instance): each instance's own journal login
    files = re.findall(r"^EnvironmentFile=(.*)$", UNIT.read_text(), flags=re.M)
    assert files == ["/etc/dealer/node-%i.env"], files
    seen = []
    for instance in ("1", "2", "3"):
        env = unit_environment("hostb", instance)
        assert "DEALER_SERVICE__NODE_ID" in env and "DEALER_SERVICE__METRICS_PORT" in env, env
        with monkeypatch.context() as m:
            for k, v in env.items():
                m.setenv(k, v)
            s = load_settings(STUDIO)
        seen.append((s.service.node_id, s.mqtt.client_id, s.service.metrics_port))
    assert seen == [("hostb-1", "dealer-hostb-1", 9101), ("hostb-2", "dealer-hostb-2", 9102),
                    ("hostb-3", "dealer-hostb-3", 9103)]
    assert s.service.journal_url, "several processes share tables only through the PostgreSQL journal"


@pytest.mark.parametrize("unit", ["systemd/dealer@.service", "cluster/dealer-node.service",
                                  "cluster/dealer-node@.service"])
def test_every_backend_unit_reloads_with_sighup_to_its_main_process(unit: str) -> None:
    """``systemctl reload`` must reach ``dealer run``'s SIGHUP handler (keys and table settings
    without a restart, docs/commands.md): without ExecReload systemd refuses the reload."""
    text = (ROOT / "deploy" / unit).read_text()
    assert re.findall(r"^ExecReload=(.*)$", text, flags=re.M) == ["/bin/kill -HUP $MAINPID"], unit
    assert re.search(r"^ExecStart=\S+/dealer run ", text, flags=re.M), unit
