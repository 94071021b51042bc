"""Journal retention through the real service: a real Mosquitto, a PTY shoe, rolling while
dealing, a restart mid-deal, and the head anchored on the retained journal topic."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from dealer.edge import topics
from tools.audit import anchor_from_broker, recall
from dealer.edge.config import load_settings
from dealer.edge.journal import Journal
from dealer.edge.segments import segment_dir, verify
from drivers.mqtt import MqttBus
from tests.conftest import Broker, wait_until
from tests.harness import DEAL, POSITIONS, READER, TABLE, HandShoe, Recorder, key, round_id, start_service, stop_service

def settings(tmp: Path, broker: Broker, port: str):
    return load_settings(
        service={"node_id": "seg-host", "journal_path": tmp / "journal.sqlite", "metrics_enabled": False,
                 "journal_segment_rows": 10, "journal_retain_rows": 5, "journal_anchor_seconds": 0.2},
        mqtt={"url": broker.url, "client_id": "backend-segments"},
        tables=[{"id": TABLE, "game": "teen-patti", "betting_seconds": 0.2, "pause_seconds": 0.05,
                 "scanner": {"kind": "serial", "port": port, "reader_id": READER, "heartbeat_timeout": 30}}])


async def deal(rec: Recorder, shoe: HandShoe, rid: str, cards: list[str]) -> None:
    for code, pos in zip(cards, POSITIONS):
        await wait_until(lambda: rec.expects(pos, rid), what=f"NEXT {pos} of {rid}")
        shoe.scan(code)


async def test_rolling_while_dealing_then_restart_replays_the_same_table(broker: Broker, tmp_path: Path,
                                                                       pty_dir: Path):
    shoe = HandShoe(pty_dir)
    rec = await Recorder(broker.url).start()
    cfg = settings(tmp_path, broker, shoe.path)
    service, task = await start_service(cfg)
    try:
        for n in range(1, 9):
            await deal(rec, shoe, round_id(service, n), DEAL)
            k = key(service, n)
            await wait_until(lambda: rec.results(k), what=f"result {k}")
        await wait_until(lambda: service.maintenance.segments >= 3, what="three segments rolled")
        # mid-deal of round 9: stop, start again, the deal goes on where it was
        rid = round_id(service, 9)
        for code, pos in zip(DEAL[:3], POSITIONS[:3]):
            await wait_until(lambda: rec.expects(pos, rid), what=f"NEXT {pos}")
            shoe.scan(code)
        await wait_until(lambda: rec.expects("B2", rid), what="NEXT B2")
    finally:
        await stop_service(task)
    rolled = len(list(segment_dir(cfg.service.journal_path).glob("*.sqlite")))
    assert rolled >= 3
    seen = len(rec.messages)
    service, task = await start_service(cfg)
    try:
        assert service.tables[TABLE].current.round_id == rid
        assert service.tables[TABLE].current.expected_position == "B2"
        await wait_until(lambda: any(t.endswith("/prompts") for t, _ in rec.messages[seen:]), what="prompt")
        for code, pos in zip(DEAL[3:], POSITIONS[3:]):
            await wait_until(lambda: rec.expects(pos, rid), what=f"NEXT {pos}")
            shoe.scan(code)
        k = f"{TABLE}:{rid}"
        await wait_until(lambda: rec.results(k), what="result of the restarted round")
        assert rec.results(k)[0]["cards"] == dict(zip(POSITIONS, DEAL))
        # the head is anchored, retained: a late subscriber reads it
        late = MqttBus(broker.url, client_id="auditor", accept_retained=True)
        anchors: list[dict[str, object]] = []
        late.subscribe(topics.backend_journal("seg-host"), lambda t, p: anchors.append(json.loads(p)))
        late_task = asyncio.create_task(late.run())
        await wait_until(lambda: anchors, what="the retained journal anchor")
        late_task.cancel()
        await asyncio.gather(late_task, return_exceptions=True)
        anchor = anchors[-1]
        assert anchor["segments"] >= rolled and anchor["anchor"] == f"{anchor['row_id']}:{anchor['hash']}"
    finally:
        await stop_service(task)
        await rec.stop()
        shoe.close()
    # what an auditor does (dealer audit verify --anchor-from-broker): the retained head, then the walk
    row_id, head_hash = await asyncio.to_thread(anchor_from_broker, cfg)
    assert row_id >= int(str(anchor["row_id"]))
    j = Journal(cfg.service.journal_path)
    assert row_id <= j.head[0]  # rows journaled after the last publish (the stop's own) are not covered by it
    rep = verify(j, [(row_id, head_hash)])
    assert rep.ok, rep.reason
    assert rep.segments >= rolled
    # the table's rules were journaled again so the first rows could roll; every old round is recallable
    rules_rows = [r.id for r in j.rows(TABLE) if r.type == "table_rules"]
    assert len(rules_rows) >= 2 and rules_rows[0] <= j.segment_records()[0].last_id
    j.close()
    rounds = recall(cfg, TABLE, rounds=50)
    ids = [r["round_id"] for r in rounds]
    # round 10 opens 0.05 s after round 9's result, so it may be journaled before the stop (no result)
    assert ids[:9] == [round_id(cfg, n) for n in range(1, 10)] and ids[9:] in ([], [round_id(cfg, 10)])
    assert all(r["result"]["outcome"] == "COMPLETED" for r in rounds[:9])
