"""A round's dispute report (``dealer recall --round ID --report``): the replayed round
(:mod:`tools.audit_recall`) as data (:func:`dispute_report`) and as the printed form a
supervisor signs (:func:`render_report`)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from dealer.core.events import Event
from dealer.core.messages import PlayerMessage, RoundEvent, RoundResult, StationPrompt
from dealer.core.round import Rejection, Round
from dealer.core.rules import software_version

from tools.audit_recall import Replayed, iso_time


#: Journal rows that are a supervisor's act (signed on the wire) or a refused one (security).
_SUPERVISOR_ROWS = {"supervisor_void": "void", "supervisor_pause": "pause", "supervisor_resume": "resume",
                    "supervisor_close": "close", "supervisor_reopen": "reopen", "supervisor_expose": "expose",
                    "security_event": "refused command"}
#: Journal rows that are a player's decision or action, or the timer's in the player's place.
_PLAY_ROWS = ("player_decision", "decision_timeout", "player_action", "action_timeout")
#: The core's notes of a decision or action carried out.
_PLAY_NOTES = ("decision_made", "player_acted", "reservation_executed")


def _refusal(effects: list[Any]) -> str | None:
    return next((e.reason for e in effects if isinstance(e, Rejection)), None)


def _times(row: Any, ev: Event) -> dict[str, Any]:
    return {"row": row.id, "received_at": iso_time(ev.at), "recorded_at": iso_time(row.recorded_at)}


def dispute_report(rep: Replayed) -> dict[str, Any]:
    """One round's dispute report as data (:func:`render_report` prints it): who dealt, every
    read and rescan, every card (hole cards marked private), bet, decision and action, every
    supervisor act, the result with each bet's payout, and the void. Built from the replay of
    the journal (:func:`select_rounds`), hole cards included: it is an auditor's document."""
    rec, rnd = rep.record, rep.round
    res = rep.result
    report: dict[str, Any] = {
        "round_id": rec["round_id"], "table_id": rec["table_id"], "game": rec["game"],
        "rules": {k: rec["rules"][k] for k in ("hash", "software_version", "source")},
        "journal": {**rec["journal"], "rows": rec.get("rows")},
        "made": {"at": iso_time(_now_ms()), "by": f"dealer {software_version()}"},
        "dealers": list(res.dealers if res is not None else rec.get("dealers") or []),
        "opened": None, "logons": [], "reads": [], "rescans": [], "cards": [], "bets": [], "plays": [],
        "supervisor": [], "result": None, "void": None,
    }
    private: dict[str, str | None] = {}  # position -> the player it is private to (None: nobody's, e.g. a burn)
    for row, event, effects in rep.steps:
        ev: Any = event  # each branch reads its own event type's fields
        refused = _refusal(effects)
        notes = [e for e in effects if isinstance(e, RoundEvent)]
        if ev.type == "open_round":
            report["opened"] = {**_times(row, ev), "by": ev.supervisor, "signature": ev.signature is not None,
                                "reason": ev.reason, "dealer": ev.dealer}
            if ev.supervisor is not None:
                report["supervisor"].append({**_times(row, ev), "act": "open round", "supervisor": ev.supervisor,
                                             "signature": ev.signature is not None,
                                             "issued_at": iso_time(ev.issued_at), "reason": ev.reason,
                                             "applied": refused is None, "refusal": refused})
        elif ev.type == "dealer_logon":
            report["logons"].append({**_times(row, ev), "dealer": ev.dealer_id, "applied": refused is None,
                                     "refusal": refused})
        elif ev.type in ("scan_read", "read_failed"):
            card = next((n for n in notes if n.event == "card_registered"), None)
            bad = next((n for n in notes if n.event == "scan_rejected"), None)
            burned = next((n for n in notes if n.event == "card_burned"), None)
            report["reads"].append({
                **_times(row, ev), "reader": ev.reader, "seq": getattr(ev, "seq", None),
                "code": getattr(ev, "code", None), "burn": bool(getattr(ev, "burn", False)),
                "failure": ev.reason if ev.type == "read_failed" else None,
                "registered": card.data.get("position") if card is not None else None,
                "rejected": ({"position": bad.data.get("position"), "reason": bad.data.get("reason"),
                              "detail": bad.data.get("detail")} if bad is not None else None),
                "set_aside": burned is not None, "refusal": refused})
            if card is not None and card.data.get("card") is None:
                private.setdefault(str(card.data.get("position")), None)
        elif ev.type == "place_bet":
            report["bets"].append({**_times(row, ev), "player": ev.player_id, "bet_id": ev.bet_id,
                                   "bet_type": ev.bet_type, "stake": str(ev.stake), "seat": ev.seat,
                                   "accepted": any(n.event == "bet_accepted" for n in notes),
                                   "refusal": refused or next((str(n.data.get("reason")) for n in notes
                                                               if n.event == "bet_rejected"), None)})
        elif ev.type in _PLAY_ROWS:
            done = [n for n in notes if n.event in _PLAY_NOTES]
            base = {**_times(row, ev), "type": ev.type, "refusal": refused}
            if not done:
                report["plays"].append({**base, "player": getattr(ev, "player_id", None),
                                        "action": getattr(ev, "action", None),
                                        "amount": None if getattr(ev, "amount", None) is None else str(ev.amount),
                                        "card": getattr(ev, "card", None), "street": None,
                                        "by": "timer" if "timeout" in ev.type else "player",
                                        "reserve": bool(getattr(ev, "reserve", False))})
            for n in done:
                d = n.data
                total = d.get("total")
                report["plays"].append({**base, "player": d.get("player_id"), "action": d.get("action"),
                                        "amount": total if total is not None and Decimal(str(total)) else None,
                                        "card": d.get("card"), "street": d.get("street"),
                                        "by": "timer" if d.get("by") == "timeout" else str(d.get("by") or "player"),
                                        "reserve": False})
        elif ev.type in _SUPERVISOR_ROWS:
            report["supervisor"].append({
                **_times(row, ev), "act": _SUPERVISOR_ROWS[ev.type], "supervisor": getattr(ev, "supervisor", None),
                "signature": getattr(ev, "signature", None) is not None,
                "issued_at": iso_time(getattr(ev, "issued_at", None)),
                "reason": (f"{ev.kind}: {ev.detail}" if ev.type == "security_event"
                           else f"seat {ev.seat}: {ev.card}" + (f" ({ev.reason})" if ev.reason else "")
                           if ev.type == "supervisor_expose" else getattr(ev, "reason", None)),
                "applied": refused is None and ev.type != "security_event", "refusal": refused})
            if ev.type == "supervisor_void" and refused is None:
                report["void"] = {**_times(row, ev), "supervisor": ev.supervisor, "reason": ev.reason,
                                  "signature": ev.signature is not None,
                                  "issued_at": iso_time(ev.issued_at)}
        for e in effects:
            if isinstance(e, StationPrompt) and e.kind == "RESCAN":
                report["rescans"].append({**_times(row, ev), "position": e.position, "reason": e.reason,
                                          "count": e.count, "message": e.message})
            if isinstance(e, PlayerMessage) and e.kind == "hole_card" and e.data.get("position"):
                private[str(e.data["position"])] = e.player_id
    shown = set(res.cards) if res is not None else set()
    cards = dict(rnd.cards) if rnd is not None else {}
    report["cards"] = [{"position": pos, "card": code, "private": pos in private,
                        "private_to": private.get(pos), "shown_in_result": pos in shown}
                       for pos, code in cards.items()]
    if res is not None:
        report["result"] = _result_part(res, rnd)
        if res.outcome == "VOIDED" and report["void"] is None:
            report["void"] = {"supervisor": None, "reason": res.reason, "signature": False}
    return report


def _now_ms() -> int:
    return int(datetime.now(UTC).timestamp() * 1000)


def _result_part(res: RoundResult, rnd: Round | None) -> dict[str, Any]:
    """The result's outcome, hands and each accepted bet's payout (:func:`settle_bet`, the one
    arithmetic every settlement consumer uses)."""
    from dealer.core.settlement import SettlementError, settle_bet

    payouts: list[dict[str, Any]] = []
    bets = list(rnd.bets.values()) if rnd is not None else []
    lines: list[tuple[str, str, str, Decimal]] = [(b.bet_id, b.player_id, b.bet_type, b.stake) for b in bets]
    lines += [(f"{player}:play", player, "play", d.play_stake) for player, d in res.decisions.items()
              if d.play_stake is not None]
    for bet_id, player, bet_type, stake in lines:
        try:
            s = settle_bet(bet_type, stake, res, player)
        except SettlementError as exc:
            payouts.append({"bet_id": bet_id, "player": player, "bet_type": bet_type, "stake": str(stake),
                            "outcome": None, "returned": None, "net": None, "note": str(exc)})
            continue
        payouts.append({"bet_id": bet_id, "player": player, "bet_type": bet_type, "stake": str(s.stake),
                        "outcome": s.outcome, "returned": str(s.returned), "net": str(s.net)})
    return {"outcome": res.outcome, "winner": res.winner, "reason": res.reason, "refund_all": res.refund_all,
            "idempotency_key": res.idempotency_key, "opened_at": iso_time(res.opened_at),
            "closed_at": iso_time(res.closed_at), "finished_at": iso_time(res.finished_at),
            "currency": res.money.currency, "cards": dict(res.cards),
            "hands": {k: {"cards": list(h.cards), "category": h.category} for k, h in res.hands.items()},
            "decisions": {p: json.loads(d.model_dump_json()) for p, d in res.decisions.items()},
            "payouts": payouts,
            "total_staked": str(sum((Decimal(p["stake"]) for p in payouts), Decimal(0))),
            "total_returned": str(sum((Decimal(p["returned"]) for p in payouts if p["returned"] is not None),
                                      Decimal(0)))}


def _yes(flag: bool) -> str:
    return "present" if flag else "absent"


def render_report(report: dict[str, Any]) -> str:
    """The dispute report as plain text, to be printed and signed."""
    r = report
    rows = r["journal"].get("rows") or {}
    private = any(c["private"] for c in r["cards"])
    out: list[str] = []
    title = f"DISPUTE REPORT  round {r['round_id']}"
    out += [title, "=" * len(title)]
    if private:
        out.append("CONTAINS PRIVATE HOLE CARDS: an auditor's document, not to be shown to players.")
    out += [
        f"Table             {r['table_id']}",
        f"Game              {r['game']}",
        f"Rules hash        {r['rules']['hash']}",
        f"Software version  {r['rules']['software_version'] or '(unknown)'}  (rules from {r['rules']['source']})",
        f"Journal           id {r['journal']['id']}  {r['journal']['path']}",
        f"Journal rows      #{rows.get('first')} to #{rows.get('last')}  (hash of row #{rows.get('last')}: "
        f"{rows.get('last_hash')})",
        f"Dealt by          {', '.join(r['dealers']) or '(nobody logged on)'}",
    ]
    o = r["opened"]
    if o is not None:
        by = (f"supervisor {o['by']} (signature {_yes(o['signature'])})" + (f": {o['reason']}" if o["reason"] else "")
              if o["by"] else "the backend (no supervisor's command)")
        out.append(f"Opened            {o['received_at']} by {by}")
    res = r["result"]
    if res is not None:
        out.append(f"Outcome           {res['outcome']}" + (f"  winner {res['winner']}" if res["winner"] else "")
                   + f"  at {res['finished_at']}")
    else:
        out.append("Outcome           (no result: the round is still in play in this journal)")
    out += [f"Report made       {r['made']['at']} by {r['made']['by']}, replaying the journal through the pure core",
            "Times             received = stamped where the input arrived; recorded = committed to the journal (UTC)"]

    out += ["", "1. DEALERS"]
    out.append(f"   Dealt by: {', '.join(r['dealers']) or '(nobody logged on)'}")
    for x in r["logons"]:
        out.append(f"   #{x['row']}  {x['received_at']}  dealer {x['dealer']} logged on"
                   + ("" if x["applied"] else f"  REFUSED: {x['refusal']}"))

    out += ["", "2. READS (reader, reader sequence, received, recorded)"]
    for x in r["reads"] or []:
        what = (f"no read ({x['failure']})" if x["failure"] else f"{x['code']}" + (" [burn]" if x["burn"] else ""))
        if x["registered"]:
            then = f"registered at {x['registered']}"
        elif x["rejected"]:
            rej = x["rejected"]
            then = f"REFUSED at {rej['position']}: {rej['reason']}" + (f" ({rej['detail']})" if rej["detail"] else "")
        elif x["set_aside"]:
            then = "set aside (burned)"
        else:
            then = f"not taken: {x['refusal']}" if x["refusal"] else "taken"
        seq = f"seq {x['seq']}" if x["seq"] is not None else "seq -"
        out.append(f"   #{x['row']:<6} {x['reader']:<8} {seq:<10} {what:<16} received {x['received_at']}  "
                   f"recorded {x['recorded_at']}  -> {then}")
    if not r["reads"]:
        out.append("   (none)")

    out += ["", "3. RESCANS"]
    for x in r["rescans"]:
        out.append(f"   #{x['row']:<6} {x['received_at']}  {x['position'] or '-'}  reason {x['reason']}"
                   + (f" (x{x['count']})" if x["count"] and x["count"] > 1 else "") + f": {x['message']}")
    if not r["rescans"]:
        out.append("   (none)")

    out += ["", "4. CARDS DEALT" + ("  (PRIVATE = a hole card: auditor's copy)" if private else "")]
    for c in r["cards"]:
        mark = ""
        if c["private"]:
            mark = "PRIVATE" + (f" to {c['private_to']}" if c["private_to"] else "")
            mark += ", shown in the result" if c["shown_in_result"] else ", never shown publicly"
        out.append(f"   {c['position']:<10} {c['card']:<6} {mark}".rstrip())
    if not r["cards"]:
        out.append("   (none)")

    out += ["", "5. BETS (player, time)"]
    for b in r["bets"]:
        seat = f" seat {b['seat']}" if b["seat"] is not None else ""
        verdict = "accepted" if b["accepted"] else f"REFUSED: {b['refusal']}"
        out.append(f"   #{b['row']:<6} {b['received_at']}  {b['player']}  bet {b['bet_id']}  {b['bet_type']} "
                   f"{b['stake']}{seat}  {verdict}")
    if not r["bets"]:
        out.append("   (none)")

    out += ["", "6. DECISIONS AND ACTIONS (player, time)"]
    for p in r["plays"]:
        what = " ".join(str(v) for v in (p["action"], p["card"]) if v is not None)
        what += f" (total {p['amount']})" if p["amount"] is not None else ""
        what = f"{p['street']}: {what}" if p.get("street") else what
        verdict = f"REFUSED: {p['refusal']}" if p["refusal"] else ("reserved" if p["reserve"] else "")
        out.append(f"   #{p['row']:<6} {p['received_at']}  {p['player'] or '-'}  {what or p['type']}  by {p['by']}"
                   + (f"  {verdict}" if verdict else ""))
    if not r["plays"]:
        out.append("   (none)")

    out += ["", "7. SUPERVISOR ACTS (who, signature, reason)"]
    for s in r["supervisor"]:
        verdict = "applied" if s["applied"] else f"REFUSED: {s['refusal'] or s['reason']}"
        issued = f"  signed at {s['issued_at']}" if s["issued_at"] else ""
        out.append(f"   #{s['row']:<6} {s['received_at']}  {s['act']}  by {s['supervisor'] or '(unknown)'}  "
                   f"signature {_yes(s['signature'])}{issued}  reason: {s['reason'] or '(none given)'}  {verdict}")
    if not r["supervisor"]:
        out.append("   (none)")

    out += ["", "8. RESULT AND PAYOUTS"]
    if res is None:
        out.append("   (no result yet)")
    else:
        out.append(f"   Outcome {res['outcome']}" + (f", winner {res['winner']}" if res["winner"] else "")
                   + (f", reason: {res['reason']}" if res["reason"] else "")
                   + (", every bet refunded" if res["refund_all"] else ""))
        out.append(f"   Settlement key {res['idempotency_key']}; opened {res['opened_at']}, betting closed "
                   f"{res['closed_at'] or '-'}, finished {res['finished_at']}")
        for name, h in res["hands"].items():
            out.append(f"   Hand {name}: {' '.join(h['cards'])}  ({h['category']})")
        for player, d in res["decisions"].items():
            out.append(f"   Decision {player}: {d['action']} by {d['by']}")
        out.append(f"   {'bet':<24} {'player':<12} {'type':<14} {'stake':>12} {'outcome':<8} {'returned':>12} "
                   f"{'net':>12}  ({res['currency']})")
        for p in res["payouts"]:
            if p["outcome"] is None:
                out.append(f"   {p['bet_id']:<24} {p['player']:<12} {p['bet_type']:<14} {p['stake']:>12} "
                           f"not settled: {p['note']}")
                continue
            out.append(f"   {p['bet_id']:<24} {p['player']:<12} {p['bet_type']:<14} {p['stake']:>12} "
                       f"{p['outcome']:<8} {p['returned']:>12} {p['net']:>12}")
        out.append(f"   Total staked {res['total_staked']}, total returned {res['total_returned']} {res['currency']}")

    out += ["", "9. VOID"]
    v = r["void"]
    if v is None:
        out.append("   Not voided.")
    elif v.get("supervisor"):
        out.append(f"   VOIDED by supervisor {v['supervisor']} at {v['received_at']} (signature {_yes(v['signature'])}"
                   + (f", signed at {v['issued_at']}" if v.get("issued_at") else "") + f"): {v['reason']}")
    else:
        out.append(f"   VOIDED: {v['reason']}")

    out += ["", "SIGNATURES", "",
            "   Prepared by (name) ______________________  Signature ______________________  Date __________", "",
            "   Reviewed by (name) ______________________  Signature ______________________  Date __________", ""]
    return "\n".join(out)
