"""A table's effective rules in canonical form, their hash, and the software version.

The *effective rules* are the validated fields of a table's configuration that affect play
(:class:`RulesConfig`: game, currency, minor unit, rounding, the betting,
decision and turn timers, ``alert_after``, bet limits, and the game's options with every
default filled in). Operational settings (the table id, ``pause_seconds``, ``auto_rounds``,
the scanner) are not part of them.

:func:`canonical_rules` serialises them deterministically: compact JSON with sorted keys,
decimals as plain strings, so equivalent configurations give the same
bytes and the same SHA-256 (:func:`rules_hash`). Decimals keep their written precision
("1.00" and "1" are different rules: the core shows amounts as configured). :func:`rules_from_canonical` is its inverse:
it validates the canonical JSON again through the configuration and game models and builds
the :class:`~dealer.core.round_state.TableRules` the pure core plays with. Both are pure.

The core knows no game: whoever reads rules hands in the registry of games
(:data:`~dealer.core.game_contract.GameLookup`): the edge's :class:`RulesConfig` names it
(``dealer.edge.config.RulesConfig``), and :func:`parse_canonical` and
:func:`rules_from_canonical` take it as ``games``. A game brings its own ``legacy_options``.

The service journals a ``table_rules`` event (:class:`dealer.core.events.RulesChanged`) carrying
the canonical JSON, its hash and the software version whenever either differs from the last
one journaled for the table; a round keeps the rules it opened with until it ends, and a
replay rebuilds them from the journal, never from today's configuration (GLI-style program
identification: every result names its rules hash and software version).
"""

from __future__ import annotations

import functools
import hashlib
import json
from decimal import Decimal
from enum import Enum
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from dealer.core.money import Rounding, to_money
from dealer.core.game_contract import Game, GameLookup
from dealer.core.round_state import BetLimit, TableRules

#: Version of the canonical form itself (a key of the JSON object).
FORMAT = 1
PACKAGE = "live-dealer-backend"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _exact(v: object) -> Decimal:
    return to_money(v)  # type: ignore[arg-type]  # a raw value before validation: to_money refuses any other type


def _games(cls: type, info: ValidationInfo) -> GameLookup:
    """The registry of games a validation reads: the one handed in through the validation
    context (``{"games": ...}``), else the one the model's class names."""
    games = info.context.get("games") if isinstance(info.context, dict) else None
    games = games if games is not None else getattr(cls, "games", None)
    if games is None:
        raise ValueError("no registry of games was handed in (dealer.edge.config.RulesConfig names one)")
    return games  # type: ignore[no-any-return]  # pydantic's validation context is untyped


class LimitConfig(_Strict):
    min: Decimal
    max: Decimal

    _v = field_validator("min", "max", mode="before")(classmethod(lambda cls, v: _exact(v)))

    @model_validator(mode="after")
    def _order(self) -> "LimitConfig":
        if not (0 < self.min <= self.max):
            raise ValueError(f"limits need 0 < min <= max, got min={self.min} max={self.max}")
        return self


class RulesConfig(_Strict):
    """The fields of a table that affect play: its *effective rules*. Their canonical form
    (:func:`dealer.core.rules.canonical_rules`) is journaled, and a round replays under the rules
    it opened with (:func:`dealer.core.rules.rules_from_canonical` rebuilds them)."""

    game: str
    currency: str = Field(default="EUR", pattern=r"^[A-Z]{3}$")
    minor_unit: Decimal = Decimal("0.01")
    rounding: Rounding = Rounding.DOWN
    betting_seconds: float = Field(default=15.0, gt=0, le=3600, allow_inf_nan=False)
    decision_seconds: float = Field(default=15.0, gt=0, le=3600, allow_inf_nan=False,
                                    description="players' decision timer (games with decisions)")
    action_seconds: float = Field(default=20.0, gt=0, le=3600, allow_inf_nan=False,
                                  description="peer games (stud): each player's turn timer")
    alert_after: int = Field(default=3, ge=1)
    limits: dict[str, LimitConfig] = Field(default_factory=dict)
    options: dict[str, Any] = Field(default_factory=dict, description="the game's house options and pay tables")

    #: The registry of games this model validates against: none here (the core knows no game);
    #: the edge's subclass names one, or the validation context hands one in (:func:`_games`).
    games: ClassVar[GameLookup | None] = None

    _mu = field_validator("minor_unit", mode="before")(classmethod(lambda cls, v: _exact(v)))

    @field_validator("game")
    @classmethod
    def _known_game(cls, v: str, info: ValidationInfo) -> str:
        _games(cls, info)(v)
        return v

    @field_validator("options")
    @classmethod
    def _options(cls, v: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        game = info.data.get("game")
        if game is not None:  # errors come out located under ``options``
            _games(cls, info)(game).Options.model_validate(v)
        return v

    @model_validator(mode="after")
    def _limits(self, info: ValidationInfo) -> "RulesConfig":
        if self.minor_unit <= 0:
            raise ValueError("minor_unit must be positive")
        game_class = _games(type(self), info)
        unknown = set(self.limits) - set(game_class(self.game).bet_types)
        if unknown:
            raise ValueError(f"limits for unknown bet types {sorted(unknown)} (game {self.game} has "
                             f"{list(game_class(self.game).bet_types)})")
        for bet_type, lim in self.limits.items():
            for name, amount in (("min", lim.min), ("max", lim.max)):
                try:
                    off_unit = amount % self.minor_unit != 0
                except ArithmeticError:
                    raise ValueError(f"limits.{bet_type}.{name} = {amount} cannot be expressed in minor units "
                                     f"of {self.minor_unit}") from None
                if off_unit:
                    raise ValueError(f"limits.{bet_type}.{name} = {amount} is not a whole number of minor_unit {self.minor_unit}")
        problem = game_class(self.game).from_options(self.options).check_unit(self.minor_unit)
        if problem is not None:
            raise ValueError(f"options: {problem}")
        return self


class RulesError(ValueError):
    """A canonical rules text that is not valid (not JSON, wrong format, rules that do not validate)."""


@functools.cache
def software_version() -> str:
    """The installed package's version (package metadata), or ``0+unknown``. Read once: each
    table's rules ask for it, and reading package metadata parses files (a 1,000-table start
    spent seconds in it)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(PACKAGE)
    except PackageNotFoundError:
        return "0+unknown"


def _decimal(d: Decimal) -> str:
    # Plain notation, never an exponent (money parsing refuses one), and the exponent kept:
    # "1.00" is not normalised to "1", since the games show amounts as configured.
    return format(d, "f")


def _plain(v: Any) -> Any:
    """A python-mode model dump made JSON-safe and canonical."""
    if isinstance(v, BaseModel):
        return _plain(v.model_dump())
    if isinstance(v, dict):
        return {str(k.value if isinstance(k, Enum) else k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, (set, frozenset)):
        return sorted(_plain(x) for x in v)
    if isinstance(v, Enum):
        return _plain(v.value)
    if isinstance(v, bool) or v is None or isinstance(v, (int, str)):
        return v
    if isinstance(v, float):
        return v
    if isinstance(v, Decimal):
        return _decimal(v)
    raise TypeError(f"cannot put {type(v).__name__} into canonical rules")


def canonical_rules(cfg: Any, games: GameLookup | None = None) -> str:
    """The canonical JSON of a validated table configuration's effective rules
    (a :class:`RulesConfig` or :class:`~dealer.edge.config.TableConfig`); ``games``: the
    registry of games, by default the one the configuration's class names."""
    game_class = games if games is not None else type(cfg).games
    if game_class is None:
        raise ValueError("no registry of games was handed in (dealer.edge.config.RulesConfig names one)")
    options = game_class(cfg.game).Options.model_validate(dict(cfg.options))  # defaults filled in
    doc = {
        "format": FORMAT,
        "game": cfg.game,
        "currency": cfg.currency,
        "minor_unit": _decimal(cfg.minor_unit),
        "rounding": _plain(cfg.rounding),
        "betting_seconds": float(cfg.betting_seconds),
        "decision_seconds": float(cfg.decision_seconds),
        "action_seconds": float(cfg.action_seconds),
        "alert_after": int(cfg.alert_after),
        "limits": {k: {"min": _decimal(v.min), "max": _decimal(v.max)} for k, v in cfg.limits.items()},
        "options": _plain(options),
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def rules_hash(canonical: str) -> str:
    """SHA-256 (hex) of the canonical JSON's UTF-8 bytes."""
    return hashlib.sha256(canonical.encode()).hexdigest()


def _legacy_options(games: GameLookup, game: Any) -> dict[str, Any]:
    """The options ``game`` added after rules were first journaled (:attr:`Game.legacy_options`);
    none for a name no game has (the validation says why)."""
    try:
        return dict(games(game).legacy_options)
    except ValueError:
        return {}


def parse_canonical(canonical: str, *, games: GameLookup) -> Any:
    """Validate a canonical rules text against the registry ``games`` and return it as a
    :class:`RulesConfig`."""
    try:
        doc = json.loads(canonical)
    except ValueError as exc:
        raise RulesError(f"rules are not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise RulesError(f"rules are not canonical rules of format {FORMAT}")
    doc = {k: v for k, v in doc.items() if k != "format"}
    options = doc.get("options")
    legacy = _legacy_options(games, doc.get("game")) if isinstance(options, dict) else {}
    missing = {k: v for k, v in legacy.items() if k not in options}  # type: ignore[operator]  # legacy is empty unless options is a dict
    if missing:
        doc["options"] = {**options, **missing}  # type: ignore[dict-item]  # missing is non-empty only when options is a dict
    try:
        cfg = RulesConfig.model_validate(doc, context={"games": games})
    except ValidationError as exc:
        detail = "; ".join(f"{'.'.join(str(x) for x in e['loc']) or '(top)'}: {e['msg']}" for e in exc.errors())
        raise RulesError(f"rules do not validate: {detail}") from None
    again = canonical_rules(cfg, games)
    if missing:  # compared as written then: without the options it did not have
        parsed = json.loads(again)
        for k in missing:
            del parsed["options"][k]
        again = json.dumps(parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    if again != canonical:
        raise RulesError("rules are not in canonical form (serialising them again gives other bytes)")
    return cfg


def rules_from_canonical(table_id: str, canonical: str, software_version: str = "", *,
                         games: GameLookup) -> TableRules:
    """The inverse of :func:`canonical_rules`: the core's rules for ``table_id``, with the game
    ``games`` (the registry) names. Pure. Raises :class:`RulesError` for a text that is not
    valid canonical rules."""
    cfg = parse_canonical(canonical, games=games)
    return TableRules(
        table_id=table_id, game=games(cfg.game).from_options(cfg.options), currency=cfg.currency,
        minor_unit=cfg.minor_unit, rounding=cfg.rounding, alert_after=cfg.alert_after,
        decision_ms=int(cfg.decision_seconds * 1000), action_ms=int(cfg.action_seconds * 1000),
        limits={k: BetLimit(v.min, v.max) for k, v in cfg.limits.items()},
        canonical=canonical, rules_hash=rules_hash(canonical), software_version=software_version, games=games,
    )


def own_game(game: Game) -> GameLookup:
    """The registry of rules built by hand, without one (tests, tools): the table's own game only."""
    def lookup(name: str) -> type[Game]:
        if name != game.name:
            raise ValueError(f"unknown game {name!r} (known: {game.name})")
        return type(game)
    return lookup
