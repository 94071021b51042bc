"""The valid corpus the fuzz targets mutate (built from the code: real rounds, every message
model's examples, the example configs) and :class:`Target`, the contract every fuzz target
implements (``setup``, ``generate``, ``check``, ``rejection``), with :func:`need` to state a
property and :class:`JsonTarget` for the pydantic parsers."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from tools.fuzz_inputs import (
    KEY,
    MAX_INPUT,
    OTHER_KEY,
    Violation,
    dump_json,
    encode_text,
    interesting,
    mutate_bytes,
    mutate_tree,
)


# --- the valid corpus, built from the code -----------------------------------------------------


@dataclass
class Corpus:
    frames: list[Any] = field(default_factory=list)  # Frame objects
    frame_lines: list[bytes] = field(default_factory=list)
    scanner: list[dict[str, Any]] = field(default_factory=list)
    actions: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    messages: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    configs: list[dict[str, Any]] = field(default_factory=list)
    keys: tuple[str, ...] = ()
    strings: tuple[str, ...] = ()

    def json_seeds(self) -> list[bytes]:
        docs = self.scanner + self.actions + self.events + [m for ms in self.messages.values() for m in ms]
        return [encode_text(dump_json(d)) for d in docs]


_CORPUS: Corpus | None = None


def _collect(obj: Any, keys: set[str], strings: set[str]) -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            keys.add(str(k))
            _collect(v, keys, strings)
    elif isinstance(obj, list):
        for v in obj:
            _collect(v, keys, strings)
    elif isinstance(obj, str) and len(obj) <= 40:
        strings.add(obj)


def _play_round(game: str, seed: int, *, link_cut: bool = False, void: bool = False) -> list[Any]:
    """The effects of one real round at a table of ``game`` (the messages consumers parse)."""
    from dealer.edge.config import load_settings
    from dealer.core.events import (
        ActionTimeout,
        CloseBetting,
        DealerConfirm,
        DecisionTimeout,
        LinkDown,
        OpenRound,
        PlaceBet,
        PlayerAction,
        PlayerDecision,
        ScanRead,
        SupervisorVoid,
    )
    from dealer.core.table import Table

    from tools.games import kit

    stakes = kit(game).fuzz_stakes  # whole chips for Seotda and Matgo
    rng = random.Random(seed)
    settings = load_settings(service={"metrics_enabled": False},
                             tables=[{"id": "T1", "game": game, "scanner": {"kind": "mqtt", "reader_id": "SC1"}}])
    table = Table(settings.tables[0].rules())
    game_obj = table.rules.game
    effects: list[Any] = []
    draw = random.Random(f"draw-{seed}").randbytes(32).hex()  # the round's secret draw (seeded: reproducible)
    events: list[Any] = [OpenRound(round_id="T1-000001", at=1_700_000_000_000, betting_closes_at=1_700_000_015_000,
                                   draw=draw)]
    seats = game_obj.seat_count
    for k, player in enumerate(("p1", "p2", "p3")):
        for bet_type in game_obj.bet_types:
            events.append(PlaceBet(bet_id=f"b{k}-{bet_type}", player_id=player, bet_type=bet_type,
                                   stake=rng.choice(stakes), seat=k + 1 if seats else None,
                                   at=1_700_000_001_000 + k))
    if link_cut:
        events.append(LinkDown(link="scanner:SC1", reason="heartbeat timeout", at=1_700_000_002_000))
    if void:
        events.append(CloseBetting(by="timer", at=1_700_000_015_000))
        events.append(SupervisorVoid(supervisor="sup-1", reason="card dropped face up", at=1_700_000_016_000))
    for ev in events:
        effects += table.handle(ev).effects
    if table.in_play and table.current is not None:
        effects += table.handle(CloseBetting(by="timer", at=1_700_000_015_000)).effects
        cards = rng.sample(sorted(game_obj.deck), len(game_obj.deck))
        rnd, at = table.current, 1_700_000_020_000
        while rnd.phase in ("BETTING_CLOSED", "DEALING", "ACTION"):  # peer games bet between the cards
            at += 1
            if rnd.phase == "ACTION" and rnd.hand is not None:
                turn = rnd.hand.turn_options()
                actor = rnd.hand.to_act
                buttons = list(turn.get("buttons", ()))
                ev: Any
                if buttons and rng.random() < 0.5:  # Seotda: a button, which names its own amount
                    ev = PlayerAction(player_id=actor, action=rng.choice(buttons), at=at)
                elif turn.get("cards") and rng.random() < 0.7:  # Matgo: a move names a card
                    ev = PlayerAction(player_id=actor, action=turn["actions"][0], card=rng.choice(turn["cards"]), at=at)
                elif turn.get("raise") and rng.random() < 0.3:
                    ev = PlayerAction(player_id=actor, action="RAISE", amount=turn["raise"]["min"], at=at)
                else:
                    ev = ActionTimeout(turn=rnd.turn, at=at)
            elif rnd.plan[rnd.next_index].confirm:
                ev = DealerConfirm(step=rnd.plan[rnd.next_index].name, at=at)
            else:  # a Seotda rematch reshuffles: a card is new within its shuffle
                pos = rnd.plan[rnd.next_index]
                used = {rnd.cards[p.name] for p in rnd.plan if p.deck == pos.deck and p.name in rnd.cards}
                ev = ScanRead(reader="SC1", code=next(c for c in cards if c not in used), seq=at % 1000, at=at)
            effects += table.handle(ev).effects
        if table.current.phase == "DECISION":
            effects += table.handle(PlayerDecision(player_id="p1", action="PLAY", at=1_700_000_030_000)).effects
            effects += table.handle(DecisionTimeout(at=1_700_000_045_000)).effects
    return effects


def corpus() -> Corpus:
    """Valid seeds for every target, built once from the code under test."""
    global _CORPUS
    if _CORPUS is not None:
        return _CORPUS
    from dealer.core.cards import HWATU_48, STANDARD_52
    from dealer.core.events import (
        ACTION_ADAPTER,
        EVENT_ADAPTER,
        ActionTimeout,
        CardExposed,
        CloseBetting,
        DealerConfirm,
        DecisionTimeout,
        LinkDown,
        LinkUp,
        OpenRound,
        PlaceBet,
        PlayerAction,
        PlayerDecision,
        ReadFailed,
        ResultDelivered,
        ScanRead,
        SupervisorVoid,
    )
    from dealer.core.messages import PlayerMessage, RoundEvent, RoundResult, StationPrompt
    from drivers.frames import FAULT_CODES, Frame, Status, encode_frame
    from drivers.scanner_json import ScannerMessage

    rng = random.Random(20240601)
    c = Corpus()
    payloads = {Status.OK: list(STANDARD_52[:20]) + list(HWATU_48[:8]), Status.NOREAD: [""],
                Status.MISREAD: ["", "?", "A?", "??S", "XQ7?"], Status.FAULT: sorted(FAULT_CODES), Status.HB: [""],
                Status.BOOT: ["", "1.4.2", "fw-2.0.0-rc1", "V9"]}
    for reader in ("SC1", "SC2", "GW-07", "A", "0123456789ABCDEF"):
        for status, values in payloads.items():
            for payload in values:
                seq = 0 if status is Status.BOOT else rng.choice((1, 2, 41, 999, 2**31, 2**32 - 1))
                frame = Frame(reader, seq, status, payload)
                c.frames.append(frame)
                c.frame_lines.append(encode_frame(frame))
                if hasattr(frame, "sign") and rng.random() < 0.5:  # signed frames (HMAC, protocol doc §6)
                    signed = frame.sign(rng.choice((KEY, OTHER_KEY)), rng.choice((0, 1, 7, 2**32 - 1)))
                    c.frames.append(signed)
                    c.frame_lines.append(encode_frame(signed))
    c.scanner = [json.loads(ScannerMessage.of(f).model_dump_json()) for f in c.frames[::3]]
    rid = "T1-000001"
    actions = [  # commands as they come on the wire (command id, round, turn), and a few without (refused there)
        PlaceBet(bet_id="b1", player_id="p1", bet_type="player_a", stake="10.00", round_id=rid, command_id="b1"),
        PlaceBet(bet_id="bet-2.x:y", player_id="player_7", bet_type="tie", stake="5", round_id=rid,
                 command_id="player_7-0123456789ab"),
        PlaceBet(bet_id="b3", player_id="p2", bet_type="ante", stake="25", seat=3, round_id="T2-000001",
                 command_id="c:3"),
        PlaceBet(bet_id="b4", player_id="p3", bet_type="pair_plus", stake="1.50", seat=7, at=17),
        PlayerDecision(player_id="p1", action="PLAY", round_id="T2-000001", command_id="p1-d1"),
        PlayerDecision(player_id="p2", action="FOLD"),
        CloseBetting(round_id=rid, command_id="station-1"), CloseBetting(by="timer"),
        SupervisorVoid(supervisor="sup", reason="misdeal", round_id=rid, command_id="v-1", issued_at=1767261690000,
                       signature="0123456789abcdef" * 4),
        PlaceBet(bet_id="s1", player_id="p4", bet_type="chips", stake="50.00", seat=2, round_id="T1-000001",
                 command_id="s1"),
        PlayerAction(player_id="p1", action="BRING_IN", amount="0.50", round_id=rid, turn=1, command_id="a-1"),
        PlayerAction(player_id="p2", action="RAISE", amount="2.00", round_id="T1-000001", turn=3, command_id="a.2"),
        PlayerAction(player_id="p3", action="CALL", reserve=True, round_id=rid, command_id="a-3"),
        PlayerAction(player_id="p4", action="ALL_IN"),
        DealerConfirm(step="SHUFFLE", round_id=rid, command_id="station-2"), DealerConfirm(step="WASH"),
        CardExposed(position="P3.7", round_id=rid, command_id="station-3"),
    ]
    c.actions = [json.loads(ACTION_ADAPTER.dump_json(a)) for a in actions]
    events = actions + [
        OpenRound(round_id="T1-000001", at=5, betting_closes_at=15_005, draw="0f" * 32),
        ScanRead(reader="SC1", code="AS", seq=4, at=9), ScanRead(reader="SC1", code="01G", at=9),
        ReadFailed(reader="SC1", reason="corrupt_frame", detail="bad CRC", at=10),
        LinkDown(link="scanner:SC1", reason="heartbeat timeout"), LinkUp(link="broker"), DecisionTimeout(at=3),
        ActionTimeout(turn=3, at=4),
        ResultDelivered(round_id="T1-000001", outbox_id=12),  # a journal older than acknowledgements
        ResultDelivered(round_id="T1-000001", idempotency_key="T1:T1-000001", outbox_id=12),
    ]
    c.events = [json.loads(EVENT_ADAPTER.dump_json(e)) for e in events]
    effects: list[Any] = []
    from tools.games import KITS

    for game in list(KITS):  # every registered game's rounds
        effects += _play_round(game, 1) + _play_round(game, 2, link_cut=True) + _play_round(game, 3, void=True)
    by_model: dict[str, list[dict[str, Any]]] = {"round_result": [], "player_message": [], "station_prompt": [],
                                                 "round_event": []}
    names = {RoundResult: "round_result", PlayerMessage: "player_message", StationPrompt: "station_prompt",
             RoundEvent: "round_event"}
    for eff in effects:
        name = names.get(type(eff))
        if name is not None:
            by_model[name].append(json.loads(eff.model_dump_json()))
    c.messages = {k: _dedupe(v)[:60] for k, v in by_model.items()}
    c.configs = _config_seeds()
    keys: set[str] = set()
    strings: set[str] = set()
    for doc in c.scanner + c.actions + c.events + c.configs + [m for ms in c.messages.values() for m in ms]:
        _collect(doc, keys, strings)
    c.keys = tuple(sorted(keys | {"extra", "", "__proto__", "type ", "Type"}))
    c.strings = tuple(sorted(strings))
    _CORPUS = c
    return c


def _dedupe(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for d in docs:
        seen.setdefault(json.dumps(d, sort_keys=True), d)
    return list(seen.values())


def _config_seeds() -> list[dict[str, Any]]:
    teen = {"id": "T1", "game": "teen-patti", "currency": "EUR", "minor_unit": "0.01", "rounding": "DOWN",
            "betting_seconds": 15.0, "pause_seconds": 3.0, "auto_rounds": True, "alert_after": 3,
            "limits": {"player_a": {"min": "1", "max": "500"}, "tie": {"min": "0.50", "max": "50"}},
            "options": {"tie_ratio": "50", "main_ratio": "0.95", "deal_order": "ALTERNATE"},
            "scanner": {"kind": "serial", "port": "/dev/ttyUSB0", "reader_id": "SC1", "baudrate": 115200,
                        "heartbeat_timeout": 5.0}}
    seven = {"id": "T2", "game": "sevenluck", "currency": "USD", "minor_unit": "1", "rounding": "HALF_UP",
             "decision_seconds": 15.0,
             "options": {"hand_mode": "SEATED", "seats": 7, "decision_timeout_action": "FOLD",
                         "pair_plus": {"straight_flush": "40", "three_of_a_kind": "30", "straight": "6",
                                       "flush": "4", "pair": "1"}},
             "scanner": {"kind": "mqtt", "reader_id": "GW-2", "heartbeat_timeout": 2.5}}
    service = {"node_id": "studio-host-1", "journal_path": "dealer-journal.sqlite", "fsync": True,
               "metrics_enabled": False, "metrics_addr": "127.0.0.1", "metrics_port": 0, "log_level": "info"}
    mqtt = {"url": "mqtts://broker.studio:8883", "client_id": "dealer-backend", "username": "dealer",
            "password_file": "/run/secrets/mqtt", "keepalive": 10, "ca_file": "/etc/ssl/ca.pem"}
    return [
        {"service": service, "mqtt": mqtt, "tables": [teen, seven]},
        {"tables": [teen]},
        {"service": {"journal_path": "j.sqlite"}, "tables": [seven]},
        {"mqtt": {"url": "mqtt://127.0.0.1:1883"}},
        {},
    ]


# --- targets ----------------------------------------------------------------------------------


class Target:
    """One parser under test. ``check`` returns True (accepted) or False (refused with a reason,
    checked here), raises :class:`Violation` for a broken property, or lets a documented
    exception (``allowed``) escape, whose message ``rejection`` then checks."""

    name = ""
    allowed: tuple[type[BaseException], ...] = ()

    def setup(self, seed: int) -> None:
        self.corpus = corpus()
        self.state_rng = random.Random(f"{seed}:{self.name}:state")

    def close(self) -> None:
        pass

    def generate(self, rng: random.Random) -> Any:
        raise NotImplementedError

    def from_bytes(self, data: bytes) -> Any:
        """The input of the coverage-guided engine: raw bytes shaped for this target."""
        return data

    def to_bytes(self, inp: Any) -> bytes:
        """A generated input as bytes (seeds for the coverage-guided engine)."""
        return inp if isinstance(inp, bytes) else repr(inp).encode()

    def check(self, inp: Any) -> bool:
        raise NotImplementedError

    def rejection(self, exc: BaseException) -> None:
        if not str(exc).strip():
            raise Violation(f"{type(exc).__name__} without a message")


def guard_core(table: Any, remember: Any) -> None:
    """Hand every exception of ``table.handle`` to ``remember`` before it goes on: the service's
    commit loop turns one into an "internal error" refusal, which would hide it from the fuzzer."""
    inner = table.handle

    def handle(ev: Any) -> Any:
        try:
            return inner(ev)
        except Exception as exc:
            remember(exc)
            raise

    table.handle = handle


def need(cond: bool, what: str, key: str | None = None) -> None:
    if not cond:
        raise Violation(what, key)


class JsonTarget(Target):
    """A pydantic model or adapter parsing JSON bytes: refusals are ValidationError only."""

    def setup(self, seed: int) -> None:
        super().setup(seed)
        from pydantic import ValidationError

        self.allowed = self.validation_error = (ValidationError,)
        self.seeds = self.own_seeds()
        self.all_seeds = self.corpus.json_seeds()

    def own_seeds(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    def generate(self, rng: random.Random) -> bytes:
        r = rng.random()
        if r < 0.10:
            doc: Any = rng.choice(self.seeds)
        elif r < 0.80:
            doc = mutate_tree(rng.choice(self.seeds), rng, self.corpus.keys, self.corpus.strings)
        elif r < 0.85:
            doc = interesting(rng, self.corpus.strings)
        else:
            data = encode_text(dump_json(rng.choice(self.seeds), ascii=rng.random() < 0.5))
            return mutate_bytes(data, rng, self.all_seeds)
        return encode_text(dump_json(doc, ascii=rng.random() < 0.7))[:MAX_INPUT]

    def parse(self, data: bytes) -> Any:
        raise NotImplementedError

    def dump(self, obj: Any) -> bytes:
        return obj.model_dump_json().encode()

    def check(self, inp: bytes) -> bool:
        obj = self.parse(inp)
        again = self.dump(obj)
        try:
            self.parse(again)
        except self.allowed as exc:
            raise Violation(f"an accepted message does not re-validate from its own JSON: {exc}") from None
        return True

    def rejection(self, exc: BaseException) -> None:
        super().rejection(exc)
        errors = exc.errors()  # type: ignore[attr-defined]  # a rejection here is a pydantic ValidationError
        need(bool(errors) and all(e.get("msg") for e in errors), "ValidationError with an error without a message")
