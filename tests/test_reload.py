"""Reload without a restart (issue 28): SIGHUP applies supervisor keys, scanner keys and table
settings while the tables play; the round in play keeps its rules; each change is journaled; a
change that needs a restart is refused whole and changes nothing. Through the real backend and
a Mosquitto with the rendered ACL (the broker of tests/harness_acl.py), and ``dealer run`` as
a process for the signal itself."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dealer.core.operations import Mode
from dealer.edge import topics
from dealer.edge.journal import Journal
from dealer.edge.reload import reload_service, restart_only
from dealer.edge.signing import key_fingerprint
from simulators.secure_broker import SecureMosquitto
from tests.conftest import poll_until, wait_until
from tests.harness import secret_file
from tests.harness_acl import broker  # noqa: F401  (broker: the module-scoped secure broker fixture)
from tests.harness_roles import OTHER_KEY, SUP_KEY, Client, backend, operation, studio

ROOT = Path(__file__).resolve().parents[1]


async def test_a_rotated_key_and_new_rules_apply_at_once_and_the_round_in_play_keeps_its_rules(
        broker: SecureMosquitto, tmp_path: Path) -> None:  # noqa: F811
    s = studio(tmp_path, broker)
    async with backend(s, broker) as (service, _gw), Client(broker, "supervisor-sup-ana") as sup, \
            Client(broker, "ops", "studio/v1/tables/+/events", "studio/v1/tables/+/state") as ops:
        await wait_until(lambda: service.tables["T1"].current is not None, what="T1's round open for bets")
        table = service.tables["T1"]
        rid, played = table.current.round_id, table.current.rules.rules_hash
        secret_file(tmp_path / "sup-ana.key", OTHER_KEY.hex())  # the supervisor's key file rotated in place
        new = s.model_copy(deep=True)
        new.tables[0] = new.tables[0].model_copy(update={"betting_seconds": 12.0})
        assert reload_service(service, lambda: new, None)
        await wait_until(lambda: ops.events("keys_changed") and ops.events("rules_changed"), what="both journaled")
        assert [e["table_id"] for e in ops.events("keys_changed")] == ["T1"]  # sup-ana may command T1 only
        assert ops.events("keys_changed")[0]["data"] == {"scanner_keys": None, "supervisors": ["sup-ana"]}
        assert table.current.round_id == rid and table.current.rules.rules_hash == played  # in play: unchanged
        assert table.rules.rules_hash == service.configs["T1"].rules().rules_hash != played  # the next round's
        assert service.configs["T1"].betting_seconds == 12.0

        await sup.send(topics.supervisor("T1"), operation("pause", key=SUP_KEY, command_id="pause-old-key"))
        await wait_until(lambda: [e for e in ops.events("rejected") if e["data"].get("command_id") == "pause-old-key"],
                         what="the old key refused")
        assert table.mode is not Mode.PAUSED
        await sup.send(topics.supervisor("T1"), operation("pause", key=OTHER_KEY))
        await wait_until(lambda: table.mode is Mode.PAUSED, what="the new key's pause applied")
        uses = service.metrics.registry.get_sample_value(
            "dealer_supervisor_key_uses_total", {"supervisor": "sup-ana", "key": key_fingerprint(OTHER_KEY)})
        assert uses == 1  # labelled by fingerprint, not by position
        assert service.metrics.registry.get_sample_value(  # rescans per reader: a join on this
            "dealer_table_reader_info", {"table": "T1", "reader": "SC1", "game": "teen-patti"}) == 1
        applied = service.metrics.registry.get_sample_value("dealer_config_reloads_total", {"outcome": "applied"})
        assert applied == 1

        # a change that needs a restart: refused whole, nothing changes (the rules change with it neither)
        moved = new.model_copy(deep=True)
        moved.service = moved.service.model_copy(update={"node_id": "n2"})
        moved.tables[0] = moved.tables[0].model_copy(update={"betting_seconds": 20.0})
        assert restart_only(new, moved) == ["[service] node_id"]
        assert not reload_service(service, lambda: moved, None)
        assert service.configs["T1"].betting_seconds == 12.0 and service.settings.service.node_id == "n1"
        refused = service.metrics.registry.get_sample_value("dealer_config_reloads_total", {"outcome": "refused"})
        assert refused == 1
    journal = Journal.open_read_only(tmp_path / "journal.sqlite")
    try:
        rows = [json.loads(r.body) for r in journal.rows("T1") if r.type == "keys_changed"]
        assert rows and rows[0]["supervisors"] == {"sup-ana": [key_fingerprint(OTHER_KEY)]}  # the audit's record
        assert not [r for r in journal.rows("T2") if r.type == "keys_changed"]
        assert len([r for r in journal.rows("T1") if r.type == "table_rules"]) == 2
    finally:
        journal.close()


def test_restart_only_names_every_difference(tmp_path: Path) -> None:
    from dealer.edge.config import load_settings

    base = {"service": {"journal_path": tmp_path / "j.sqlite"}, "mqtt": {"in_process": True},
            "tables": [{"id": "T1", "game": "teen-patti", "scanner": {"kind": "mqtt", "reader_id": "SC1"}}]}
    old = load_settings(**base)
    same_but_rules = load_settings(**{**base, "tables": [{**base["tables"][0], "betting_seconds": 9.0,
                                                          "limits": {"player_a": {"min": "1", "max": "50"}}}]})
    assert restart_only(old, same_but_rules) == []
    other = load_settings(**{**base, "tables": [{**base["tables"][0], "game": "sevenluck",
                                                 "scanner": {"kind": "serial", "port": "/dev/x", "reader_id": "SC1"}}]})
    assert restart_only(old, other) == ["table T1: game, scanner.kind, scanner.port"]
    more = load_settings(**{**base, "tables": base["tables"] + [{**base["tables"][0], "id": "T2",
                                                                        "scanner": {"kind": "mqtt", "reader_id": "SC2"}}]})
    assert restart_only(old, more) == ["the tables added: T2"]


@pytest.mark.integration
def test_sighup_reloads_a_running_dealer_run_and_a_bad_file_changes_nothing(tmp_path: Path) -> None:
    cfg = tmp_path / "dealer.toml"
    text = f"""
[service]
journal_path = "{tmp_path / 'journal.sqlite'}"
metrics_enabled = false
[mqtt]
in_process = true
[[tables]]
id = "T1"
game = "teen-patti"
betting_seconds = 30
[tables.scanner]
kind = "mqtt"
reader_id = "SC1"
"""
    cfg.write_text(text)
    cfg.chmod(0o640)
    log = tmp_path / "run.log"
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("DEALER_")} | {"PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "dealer", "run", "--config", str(cfg)], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=log.open("wb"))

    def events(name: str) -> list[dict]:
        return [json.loads(x) for x in log.read_text().splitlines() if x.startswith("{") and f'"{name}"' in x]

    try:
        poll_until(lambda: events("backend started"), 60, "backend started", alive=proc, context=log.read_text)
        cfg.write_text(text.replace("betting_seconds = 30", "betting_seconds = 25"))
        proc.send_signal(signal.SIGHUP)
        poll_until(lambda: events("configuration reloaded"), 60, "configuration reloaded", alive=proc, context=log.read_text)
        assert events("configuration reloaded")[0]["rules"] == ["T1"]
        cfg.write_text(text.replace("betting_seconds = 30", "betting_seconds = -1"))  # invalid: refused
        proc.send_signal(signal.SIGHUP)
        poll_until(lambda: events("reload refused: nothing changed"), 60, "reload refused: nothing changed", alive=proc, context=log.read_text)
        assert "betting_seconds" in events("reload refused: nothing changed")[0]["reason"]
        assert proc.poll() is None  # still running
    finally:
        proc.terminate()
        proc.wait(30)
    assert "Traceback" not in log.read_text()
    journal = Journal.open_read_only(tmp_path / "journal.sqlite")
    try:
        rules = [json.loads(json.loads(r.body)["rules"])["betting_seconds"] for r in journal.rows("T1")
                 if r.type == "table_rules"]
    finally:
        journal.close()
    assert rules == [30.0, 25.0]


def test_a_scanner_key_file_rewritten_in_place_is_a_reload_of_that_key_only(tmp_path: Path) -> None:
    from dealer.edge.config import load_settings
    from dealer.edge.keys import supervisor_verifier
    from dealer.edge.reload import plan
    from drivers.frames import FrameAuthenticator, key_fingerprint as scanner_fingerprint

    k1, k2 = bytes.fromhex("33" * 32), bytes.fromhex("44" * 32)
    key = secret_file(tmp_path / "sc1.key", k1.hex())
    cfg = tmp_path / "dealer.toml"
    cfg.write_text(f'[service]\njournal_path = "{tmp_path / "j.sqlite"}"\n[mqtt]\nin_process = true\n'
                   f'[[tables]]\nid = "T1"\ngame = "teen-patti"\n[tables.scanner]\nkind = "mqtt"\nreader_id = "SC1"\n'
                   f'hmac_key_files = ["{key}"]\n')
    cfg.chmod(0o640)
    old = load_settings(cfg)
    auth = FrameAuthenticator([k1], require=True)
    auth.verified = [5]
    verifier = supervisor_verifier(old.security)
    assert not plan(old, load_settings(cfg), cfg, {"T1": auth.fingerprints}, verifier).changes  # nothing new
    secret_file(key, "not a key")  # a broken key file: refused, nothing changes
    assert "must hold the key as hex digits" in " ".join(plan(old, load_settings(cfg), cfg, {"T1": auth.fingerprints},
                                                              verifier).refused)
    secret_file(key, k1.hex())
    second = secret_file(tmp_path / "sc1-new.key", k2.hex())
    cfg.write_text(cfg.read_text().replace(f'["{key}"]', f'["{second}", "{key}"]'))  # a rotation: new first, old kept
    r = plan(old, load_settings(cfg), cfg, {"T1": auth.fingerprints}, verifier)
    assert list(r.scanner_keys) == ["T1"] and r.verifier is None and not r.refused
    auth.rekey(r.scanner_keys["T1"])
    assert auth.fingerprints == [scanner_fingerprint(k2), scanner_fingerprint(k1)] and auth.verified == [0, 5]
