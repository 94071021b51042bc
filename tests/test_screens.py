"""The screens in a real browser against a real studio: Debian's headless Chromium (Playwright),
``dealer web``, a real ``dealer run`` with one table of each game, Mosquitto with the deployed
configuration (TLS, passwords, the rendered ACL), ``dealer settle`` and ``dealer simulate`` dealing
with faults (no-reads, duplicate and foreign cards): ``tools/web_studio.py``.

* each game's station page shows the next position, a RESCAN after a no-read, a duplicate card's
  refusal, a face-down card as a back (Teen Patti deals every card face up) and the result;
* logged in as ``ops`` or as a station, no hole card reaches the page (its WebSocket's MQTT
  stream, parsed, against what the journal says was shown);
* a malformed or oversized message on a topic the page reads is shown as an error, and the page
  goes on working;
* protocol 2: the station reads each state's events and prompts once per version (a retained copy
  delivered again is not logged twice), and an ALERT that the next prompt replaced (in the same
  batch, or a security ALERT the deal went past) stays on the station and the floor until a person
  dismisses it;
* a void signed on the floor page (WebCrypto) voids the round, with the very signature ``dealer
  supervisor void`` makes for the same command; a tampered or unsigned act changes nothing;
* a broker restart: the page says BROKER DOWN, reconnects and resyncs from the retained topics;
* the floor shows every table offline when the backend is killed, and online when it is back.

Each test keeps screenshots (``$DEALER_SCREENSHOTS``, else the test's folder); docs/screens/ holds a
few of them."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from dealer.cli.supervisor import build_void
from dealer.edge.config import load_settings
from tests.browser import chromium, open_page, screenshot_dir, state, studio_fixture, until  # noqa: F401  (fixture)
from tests.wire import card_fields, publishes
from tools.audit import recall
from tools.web_studio import SUPERVISOR, WebStudio

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]

#: A face-down card on each game's station (Teen Patti 20-20 deals every card face up).
HAS_BACKS = {"TP1": False, "SL1": True, "ST1": True, "SE1": True, "MG1": True}


#: Quick rounds (2.5 s betting, a card every 0.1 s) and many faults: every game shows a no-read and a
#: duplicate card within a few rounds.
studio = studio_fixture(faults=0.2, seed=11, deal_interval=0.1, betting_seconds=2.5)


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return screenshot_dir(tmp_path_factory.mktemp("screenshots"))


def _seen(page: Any) -> dict[str, bool]:
    """What a station page has shown so far (its own record of prompts, and its DOM now)."""
    return page.evaluate("""() => {
      const s = window.screenState, seen = s.promptsSeen;
      return {
        next: seen.some((p) => p.kind === "NEXT" && p.position),
        noread: seen.some((p) => p.kind === "RESCAN" && p.reason === "noread"),
        duplicate: seen.some((p) => p.kind === "RESCAN" && p.reason === "duplicate_card"),
        back: document.querySelector("#cards .card.back") !== null
              && document.querySelector("#cards .card.back[data-code]") === null,
        result: seen.some((p) => p.kind === "DONE") && document.querySelector("#strip .strip-round") !== null,
        online: s.online === true,
      };
    }""")


def test_each_games_station_shows_the_next_card_rescans_backs_and_the_result(
        studio: WebStudio, chromium: Any, shots: Path) -> None:  # noqa: F811
    pages = {t: open_page(chromium, studio.station_login_url(t))[0] for t in studio.tables}
    seen: dict[str, dict[str, bool]] = {t: {} for t in pages}
    shot: set[str] = set()

    def everything() -> bool:
        for t, page in pages.items():
            now = _seen(page)
            for k, v in now.items():
                seen[t][k] = seen[t].get(k, False) or v
            if now["back"] and now["online"] and t not in shot:  # mid-deal, a back on the table
                page.screenshot(path=str(shots / f"station-{t}.png"))
                shot.add(t)
            if t == "TP1" and now["next"] and now["online"] and t not in shot:
                page.screenshot(path=str(shots / f"station-{t}.png"))
                shot.add(t)
        want = ("next", "noread", "duplicate", "result")
        return all(all(seen[t].get(k) for k in want) and (seen[t].get("back") or not HAS_BACKS[t]) for t in pages)

    until(everything, 300, f"every station to show a NEXT, a no-read RESCAN, a duplicate's RESCAN, a back and a "
                           f"result (so far: {seen})", step=0.2)
    for t, page in pages.items():
        s = state(page)
        assert s["errors"] == [] and page.problems == [], (t, s["errors"], page.problems)
        page.context.close()


def _round_truth(studio: WebStudio, table: str, rounds: int = 200) -> dict[str, tuple[set[tuple[str, str]], set[tuple[str, str]]]]:
    """Per round that has its result, from the journal replayed through the core (``dealer
    recall``): (what was shown publicly, the hole cards delivered to players privately). A round
    still in play is left out: until its result names every card shown, its events alone do not
    (a Matgo card played from the hand is shown without its position), so the truth of it would
    be partial."""
    out: dict[str, tuple[set[tuple[str, str]], set[tuple[str, str]]]] = {}
    for rnd in recall(load_settings(studio.config_path), table, rounds):
        if not rnd.get("result"):
            continue
        public: set[tuple[str, str]] = set()
        private: set[tuple[str, str]] = set()
        for ev in rnd["events"]:
            for eff in ev["effects"]:
                if "private_to" in eff:
                    if eff.get("kind") == "hole_card":
                        private.add((eff["position"], eff["card"]))
                elif "event" in eff:
                    public.update(card_fields(eff))
        public.update((p, c) for p, c in (rnd.get("result") or {}).get("cards", {}).items())
        out[rnd["round_id"]] = (public, private)
    return out


def _parts(msg: Any) -> list[dict[str, Any]]:
    """A table message as the parts that each belong to one round: a state (protocol 2) carries
    the events and prompts of its batch, which may be of the round before the state's own (a
    round's last events and the next round's opening in one batch), so each is its own part."""
    if not isinstance(msg, dict):
        return []
    if msg.get("schema_id") != "studio.v1.table_state":
        return [msg]
    own = {k: v for k, v in msg.items() if k not in ("prompt", "events", "prompts")}
    nested = [msg.get("prompt"), *(msg.get("events") or []), *(msg.get("prompts") or [])]
    return [own, *(m for m in nested if isinstance(m, dict))]


def _shown_on_the_wire(sockets: list[list[bytes]], table: str) -> tuple[list[str], dict[str, set[tuple[str, str]]]]:
    """(every topic the page received, per round the cards it was shown) from its MQTT streams."""
    topics: list[str] = []
    shown: dict[str, set[tuple[str, str]]] = {}
    for pub in (p for frames in sockets for p in publishes(frames)):
        topics.append(pub.topic)
        if f"/tables/{table}/" not in pub.topic:
            continue
        for part in _parts(pub.json()):
            if part.get("round_id"):
                shown.setdefault(part["round_id"], set()).update(card_fields(part))
            else:
                assert not list(card_fields(part)), f"cards shown outside any round on {pub.topic}: {part}"
    return topics, shown


def _showing(sockets: list[list[bytes]], rid: str, cards: set[tuple[str, str]]) -> list[tuple[str, str]]:
    """The messages (topic, first 2,000 characters) of round ``rid`` that showed ``cards``."""
    out = []
    for pub in (p for frames in sockets for p in publishes(frames)):
        for part in _parts(pub.json()):
            if part.get("round_id") == rid and set(card_fields(part)) & cards:
                out.append((pub.topic, json.dumps(part)[:2000]))
    return out


def test_no_hole_card_reaches_ops_or_a_station_on_the_wire(studio: WebStudio, chromium: Any) -> None:  # noqa: F811
    floor, floor_wire = open_page(chromium, studio.floor_login_url("ops"), wire=True)
    station, station_wire = open_page(chromium, studio.station_login_url("SL1"), wire=True)
    assert floor_wire is not None and station_wire is not None
    start = len(studio.lines("simulate"))

    def rounds_done() -> int:
        return sum(1 for x in studio.lines("simulate")[start:] if x.get("table_id") in ("SL1", "ST1")
                   and x.get("event") == "round_finished")

    # (each Playwright call also delivers the frames recorded meanwhile: the sync API pumps its events then)
    until(lambda: floor.evaluate("1") and station.evaluate("1") and rounds_done() >= 4, 120,
          "two more Sevenluck and stud rounds")
    for page, wire, tables, who in ((floor, floor_wire, ("SL1", "ST1", "SE1", "MG1"), "ops"),
                                    (station, station_wire, ("SL1",), "station-SL1")):
        for table in tables:
            topics, shown = _shown_on_the_wire(wire.sockets, table)
            assert topics, f"{who} received nothing: {[len(f) for f in wire.sockets]} frames per WebSocket"
            assert not [t for t in topics if "/players/" in t], f"{who} received a player's topic"
            truth = _round_truth(studio, table)
            checked = 0
            for rid, cards in shown.items():
                if rid not in truth:
                    continue  # a round still in play: the journal has not finished it in recall's view
                public, private = truth[rid]
                assert cards <= public, (f"{who} was shown cards of {rid} that were never public: {cards - public}",
                                         _showing(wire.sockets, rid, cards - public))
                assert not (cards & (private - public)), f"{who} got a hole card of {rid}"
                checked += 1
            assert checked >= 1 or table in ("SE1", "MG1"), (who, table, list(shown))
        page.context.close()


def test_a_malformed_or_oversized_message_shows_an_error_and_the_page_goes_on(studio: WebStudio, chromium: Any) -> None:  # noqa: F811
    page, _ = open_page(chromium, studio.station_login_url("TP1"))
    until(lambda: state(page)["online"], 30, "the station online")
    studio.publish_raw("studio/v1/tables/TP1/events", b"{not json")
    studio.publish_raw("studio/v1/tables/TP1/events", b'{"schema_id":"studio.v1.event","table_id":"TP1","event":"x",'
                                                      b'"data":"' + b"A" * 200_000 + b'"}')
    studio.publish_raw("studio/v1/tables/TP1/state", b'{"schema_id":"studio.v1.table_state","table_id":"TP1"}')
    errs = until(lambda: len(state(page)["errors"]) >= 3 and state(page)["errors"], 20, "three errors on the page")
    assert any("not UTF-8 JSON" in e for e in errs) and any("over the" in e for e in errs), errs
    assert any("/state" in e and "cards" in e for e in errs), errs
    assert page.locator("#errors .error-item").count() >= 3 and page.locator("#errors").is_visible()
    # ... and it keeps working: new prompts still come in and are shown
    n = len(state(page)["promptsSeen"])
    until(lambda: len(state(page)["promptsSeen"]) > n + 2, 30, "more prompts after the bad messages")
    assert state(page)["online"] and page.problems == [], page.problems
    page.context.close()


def _journaled_voids(studio: WebStudio) -> list[dict[str, Any]]:
    db = sqlite3.connect(f"file:{studio.journal_path}?mode=ro", uri=True, timeout=10)
    try:
        return [json.loads(b) for (b,) in db.execute("SELECT body FROM events WHERE type = 'supervisor_void'")]
    finally:
        db.close()


def test_a_void_signed_on_the_floor_is_the_clis_signature_and_a_tampered_one_changes_nothing(
        studio: WebStudio, chromium: Any, shots: Path) -> None:  # noqa: F811
    page, _ = open_page(chromium, studio.floor_login_url(f"supervisor-{SUPERVISOR}"), size=(1920, 1080))
    until(lambda: state(page)["connected"], 30, "the floor connected")
    page.set_input_files("#key-file", str(studio.supervisor_key_file))
    until(lambda: state(page)["keyLoaded"], 10, "the key loaded")
    page.click('.tile[data-table="TP1"]')

    def act(name: str, reason: str | None = None) -> dict[str, Any]:
        n = len(state(page)["answers"])
        page.click(f'[data-acts="TP1"] button[data-act="{name}"]')
        if reason is not None:
            page.fill(".modal-box input", reason)
        page.click(f'button[data-confirm="{name}"]')
        until(lambda: len(state(page)["answers"]) > n and state(page)["answers"][-1]["status"] != "SENT", 20,
              f"the answer to {name}")
        return state(page)["answers"][-1]

    def tp1() -> dict[str, Any]:
        return state(page)["tables"]["TP1"]["state"] or {}

    # pause with a round in play (a pause between rounds is resumed and tried again): it stands still
    for _ in range(10):
        until(lambda: tp1().get("phase") in ("BETTING_OPEN", "BETTING_CLOSED", "DEALING"), 60, "a TP1 round in play")
        assert act("pause", "floor test")["status"] == "ACCEPTED"
        until(lambda: tp1().get("paused"), 10, "TP1 paused")
        if tp1().get("phase") in ("BETTING_OPEN", "BETTING_CLOSED", "DEALING"):
            break
        assert act("resume")["status"] == "ACCEPTED"
    rid = tp1()["round_id"]
    answer = act("void", "shoe dropped — cards exposed")
    assert answer["status"] == "ACCEPTED", answer
    until(lambda: any(e["event"] == "round_voided" and e["round_id"] == rid
                      for e in state(page)["tables"]["TP1"]["events"]), 20, "the round voided")
    page.screenshot(path=str(shots / "floor-supervisor.png"))
    # the signature is the one `dealer supervisor void` makes for the same command
    void = next(v for v in _journaled_voids(studio) if v["round_id"] == rid)
    key = bytes.fromhex(studio.supervisor_key_file.read_text().strip())
    cli = build_void(key, table_id="TP1", round_id=rid, reason="shoe dropped — cards exposed", supervisor=SUPERVISOR,
                     command_id=void["command_id"], issued_at=void["issued_at"])
    assert void["signature"] == cli["signature"] and void["supervisor"] == SUPERVISOR
    body = {k: v for k, v in cli.items() if k != "signature"}
    assert page.evaluate("(o) => window.dealerSigning.canonical(o)", body) == \
        json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    # a tampered act (altered after signing) and an unsigned one change nothing
    assert act("resume")["status"] == "ACCEPTED"
    until(lambda: tp1().get("phase") in ("BETTING_OPEN", "DEALING") and tp1().get("round_id") != rid, 60,
          "the next TP1 round")
    rid2 = tp1()["round_id"]
    refused = page.evaluate("""async (rid) => {
      const signed = await window.floorActs.sign(window.floorActs.build("TP1", "void", "honest reason"));
      const tampered = {...signed, reason: "another reason", command_id: signed.command_id + "-t"};
      const unsigned = window.floorActs.build("TP1", "void", "no signature");
      delete unsigned.signature;
      await window.floorActs.publish("TP1", tampered);
      await window.floorActs.publish("TP1", unsigned);
      return [tampered.command_id, unsigned.command_id];
    }""", rid2)

    def refusals() -> list[dict[str, Any]]:
        return [e for e in state(page)["tables"]["TP1"]["events"]
                if e["event"] == "rejected" and e["data"].get("command_id") in refused]

    got = until(lambda: len(refusals()) == 2 and refusals(), 20, "both acts refused")
    reasons = " | ".join(e["data"]["reason"] for e in got)
    assert "signature" in reasons, reasons
    assert not any(e["event"] == "round_voided" and e["round_id"] == rid2 for e in state(page)["tables"]["TP1"]["events"])
    assert [v["round_id"] for v in _journaled_voids(studio)].count(rid2) == 0
    page.context.close()


def test_a_broker_restart_shows_broker_down_then_reconnects_and_resyncs(studio: WebStudio, chromium: Any) -> None:  # noqa: F811
    page, _ = open_page(chromium, studio.station_login_url("SL1"))
    until(lambda: state(page)["online"], 30, "the station online")
    studio.stop_broker()
    try:
        until(lambda: state(page)["banner"] == "BROKER DOWN", 20, "BROKER DOWN on the page")
        assert page.locator("#blocker").is_visible() and "BROKER DOWN" in page.locator("#blocker").inner_text()
    finally:
        studio.start_broker()
    until(lambda: state(page)["banner"] == "CONNECTED" and state(page)["online"], 60, "reconnected and current again")
    n = len(state(page)["promptsSeen"])
    until(lambda: len(state(page)["promptsSeen"]) > n, 60, "a prompt after the restart")
    assert not page.locator("#blocker").is_visible()
    now = state(page)
    assert now["lastPrompt"] == now["state"]["prompt"]  # the prompt shown is the current state's
    # the retained state delivered again after the reconnect did not log its batch's events twice
    logged = [json.dumps(e, sort_keys=True) for e in now["events"]]
    assert len(logged) == len(set(logged)), [e for e in logged if logged.count(e) > 1]
    page.context.close()


def _feed(page: Any, table: str, kind: str, msg: dict[str, Any], retain: bool) -> None:
    """Hand ``msg`` to the page as if the broker had delivered it on the table's ``kind`` topic."""
    page.evaluate("([topic, text, retain]) => onMessage(topic, new TextEncoder().encode(text), {retain})",
                  [f"studio/v1/tables/{table}/{kind}", json.dumps(msg), retain])


def test_a_states_events_and_prompts_are_taken_once_per_version_and_a_batchs_alert_stays(
        studio: WebStudio, chromium: Any) -> None:  # noqa: F811
    """The station's reading of protocol 2, message by message: a page not logged in (no broker:
    nothing else reaches it) is handed states as the broker would deliver them."""
    page, _ = open_page(chromium, studio.station_url("TP1"))
    until(lambda: page.evaluate("typeof onMessage") == "function", 10, "the station's script")
    base = {"schema_id": "studio.v1.table_state", "table_id": "TP1", "game": "teen-patti", "node_id": "n1",
            "session": "s1", "stale": False, "round_id": "TP1-R1", "phase": "DEALING", "cards": {"A1": "AS"},
            "dealt": ["A1"], "at": 1_000}

    def prompt(kind: str, at: int, **extra: Any) -> dict[str, Any]:
        return {"schema_id": "studio.v1.prompt", "table_id": "TP1", "round_id": "TP1-R1", "kind": kind, "at": at,
                "message": extra.pop("message", f"{kind} test"), **extra}

    def event(name: str, at: int, **data: Any) -> dict[str, Any]:
        return {"schema_id": "studio.v1.event", "table_id": "TP1", "round_id": "TP1-R1", "event": name, "at": at,
                "data": data}

    alert = prompt("ALERT", 1_000, reason="security", message="SUPERVISOR: a supervisor command was refused (test)")
    nxt = prompt("NEXT", 1_000, position="B1", step=2, of=6, message="deal B1 face up")
    v5 = {**base, "version": 5, "prompt": nxt, "prompts": [alert, nxt],
          "events": [event("card_registered", 1_000, position="A1", card="AS")]}

    def seen() -> dict[str, Any]:
        s = state(page)
        return {"log": page.locator("#log li").count(), "prompts": [p["kind"] for p in s["promptsSeen"]],
                "alerts": s["alerts"], "errors": s["errors"], "shown": page.locator("#prompt").get_attribute("data-kind")}

    _feed(page, "TP1", "state", v5, retain=True)  # the retained copy at subscribe: the last batch
    now = seen()
    assert now["log"] == 1 and now["prompts"] == ["ALERT", "NEXT"] and now["shown"] == "NEXT", now
    assert len(now["alerts"]) == 1 and "was refused (test)" in now["alerts"][0], now
    assert page.locator("#alerts").is_visible() and page.locator("#alerts .error-item").count() == 1
    _feed(page, "TP1", "state", v5, retain=True)  # delivered again (a reconnect): nothing new
    _feed(page, "TP1", "state", {**v5, "version": 4, "events": [event("round_opened", 900)], "prompts": []}, retain=True)
    assert seen() == now
    rescan = prompt("RESCAN", 2_000, position="B1", reason="noread", count=1, message="RESCAN B1: no read")
    _feed(page, "TP1", "state", {**base, "version": 6, "at": 2_000, "prompt": rescan, "prompts": [rescan],
                                 "events": [event("scan_rejected", 2_000, position="B1", reason="noread")]}, retain=False)
    now = seen()
    assert now["log"] == 2 and now["prompts"] == ["ALERT", "NEXT", "RESCAN"] and now["shown"] == "RESCAN", now
    assert len(now["alerts"]) == 1 and now["errors"] == [], now
    # a state whose batch is malformed is an error on the page, and is not taken
    _feed(page, "TP1", "state", {**base, "version": 7, "prompt": rescan, "prompts": [rescan], "events": [{"event": 3}]},
          retain=False)
    errs = state(page)["errors"]
    assert len(errs) == 1 and "/state" in errs[0] and "event 0" in errs[0], errs
    assert seen()["log"] == 2
    # the replaced ALERT goes only when the dealer dismisses it
    page.click("#alerts .error-item button")
    assert state(page)["alerts"] == [] and not page.locator("#alerts").is_visible()
    assert page.problems == [], page.problems
    page.context.close()


def test_a_security_alert_the_deal_went_past_stays_on_the_station_and_the_floor(
        studio: WebStudio, chromium: Any, shots: Path) -> None:  # noqa: F811
    """The real backend: an unsigned supervisor act on SE1 is a security event, whose ALERT the
    next card's prompt replaces at once; the station keeps it listed and the floor flags it."""
    station, _ = open_page(chromium, studio.station_login_url("SE1"))
    floor, _ = open_page(chromium, studio.floor_login_url("ops"), size=(1920, 1080))
    until(lambda: state(station)["online"] and floor.locator('.tile[data-table="SE1"][data-online="yes"]').count(), 60,
          "the station and the floor online")
    sent = int(time.time() * 1000)
    command_id = f"unsigned-{sent}"
    studio.publish_raw("studio/v1/tables/SE1/supervisor", json.dumps({
        "type": "supervisor_pause", "command_id": command_id, "supervisor": SUPERVISOR, "table_id": "SE1",
        "issued_at": sent, "reason": "no signature"}).encode(), user=f"supervisor-{SUPERVISOR}")

    def security_prompts() -> list[dict[str, Any]]:
        return [p for p in state(station)["promptsSeen"] if p["kind"] == "ALERT" and p["reason"] == "security"]

    until(security_prompts, 30, "the security ALERT on the station")
    alerts = until(lambda: state(station)["alerts"], 60, "the ALERT listed once the next prompt replaced it")
    assert any("supervisor" in a and "refused" in a for a in alerts), alerts
    assert station.locator("#alerts").is_visible() and station.locator("#alerts .error-item").count() >= 1
    assert state(station)["errors"] == [], state(station)["errors"]
    station.screenshot(path=str(shots / "station-replaced-alert.png"))  # docs/screens.md
    until(lambda: state(floor)["tables"]["SE1"]["security"] >= 1, 30, "the floor counting the security ALERT")
    assert floor.locator('.tile[data-table="SE1"] .flag[data-flag="SECURITY"]').count() == 1
    assert not [e for e in state(floor)["tables"]["SE1"]["events"]
                if e["event"] == "table_paused"], "an unsigned pause paused the table"
    for page in (station, floor):
        assert page.problems == [], page.problems
        page.context.close()


def test_the_floor_shows_tables_offline_when_the_backend_dies_and_online_when_it_is_back(
        studio: WebStudio, chromium: Any, shots: Path) -> None:  # noqa: F811
    page, _ = open_page(chromium, studio.floor_login_url("ops"), size=(1920, 1080))
    tiles = page.locator(".tile")
    until(lambda: page.locator('.tile[data-online="yes"]').count() == len(studio.tables), 60, "every table online")
    page.screenshot(path=str(shots / "floor.png"))
    studio.kill_backend()
    try:
        until(lambda: page.locator('.tile[data-online="no"]').count() == len(studio.tables), 30, "every table offline")
        assert tiles.first.get_attribute("data-need") == "attention"
        assert "OFFLINE" in page.locator("#summary").inner_text()
        page.screenshot(path=str(shots / "floor-offline.png"))
    finally:
        studio.start_backend()
    until(lambda: page.locator('.tile[data-online="yes"]').count() == len(studio.tables), 60, "every table online again")
    assert page.problems == [], page.problems
    page.context.close()
