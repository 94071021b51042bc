"""Service configuration: a TOML file, overridable by ``DEALER_*`` environment variables.

Validated strictly with pydantic v2 (unknown keys are errors), so a typo in a config
file stops the service at start-up with a message naming the key, instead of running
a table with a silently ignored setting. Environment overrides use ``__`` for nesting,
e.g. ``DEALER_MQTT__URL=mqtt://broker:1883`` or ``DEALER_SERVICE__METRICS_PORT=0``.
"""

from __future__ import annotations

import re
from contextvars import ContextVar
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (AfterValidator, Field, ValidationError, field_validator,
                      model_validator)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict, TomlConfigSettingsSource

from dealer.games import game_class
from drivers import codecs
from dealer.core.game_contract import GameLookup
from dealer.core.round import TableRules
from dealer.core.rules import _Strict  # the effective rules are core
from dealer.core.rules import RulesConfig as CoreRulesConfig


class ConfigError(ValueError):
    """The configuration is invalid; the message (one line) names every offending key."""


def validation_message(exc: ValidationError, top: str = "(top)") -> str:
    """pydantic's errors as one line, ``key.path: what is wrong; ...``: never its raw text
    (several lines, the input repeated, a link to its web site)."""
    parts = []
    for e in exc.errors(include_url=False, include_input=False):
        msg = str(e["msg"])
        for prefix in ("Value error, ", "Assertion failed, "):
            msg = msg.removeprefix(prefix)
        if e["loc"]:  # "tie_ratio: tie_ratio: amount ..." says the key once
            msg = msg.removeprefix(f"{e['loc'][-1]}: ")
        parts.append(f"{'.'.join(str(x) for x in e['loc']) or top}: {' '.join(msg.split())}")
    return "; ".join(parts)


#: The directory of the config file being loaded: relative paths in it are relative to it.
_CONFIG_DIR: ContextVar[Path | None] = ContextVar("dealer_config_dir", default=None)


def _from_config_dir(p: Path) -> Path:
    """A relative path from a config file is relative to the file's directory, so the same
    file names the same journal and keys whatever directory a command runs in."""
    base = _CONFIG_DIR.get()
    return base / p if base is not None and not p.is_absolute() else p


#: A path in the configuration (see :func:`_from_config_dir`).
ConfigPath = Annotated[Path, AfterValidator(_from_config_dir)]


class ScannerConfig(_Strict):
    kind: Literal["serial", "mqtt"] = "serial"
    reader_id: str = Field(pattern=r"^[A-Z0-9-]{1,16}$")
    port: str | None = Field(default=None, description="serial device path (serial scanners)")
    protocol: str = Field(default=codecs.DEFAULT, description="what the serial reader speaks: \"native\" (the "
                          "backend's frame protocol) or \"beetek\" (a Bee-Tek shoe); docs/scanner-protocol.md")
    baudrate: int | None = Field(default=None, gt=0, le=4_000_000,
                                 description="unset = the protocol's own (native 115200, beetek 9600)")
    heartbeat_timeout: float = Field(default=5.0, gt=0, le=3600, allow_inf_nan=False,
                                     description="a reader with heartbeats is down after this long without a frame")
    hmac_key_files: list[ConfigPath] = Field(
        default_factory=list,
        description="files holding this reader's HMAC-SHA256 keys (hex); several during a key rotation: "
                    "a frame signed with any of them is accepted")
    require_mac: bool | None = Field(
        default=None,
        description="refuse frames without a valid MAC from this reader; unset = true when hmac_key_files is set "
                    "(a reader with keys never has a frame accepted unsigned: false with keys is refused by "
                    "dealer run and dealer deploy check)")

    flood_burst: int = Field(
        default=20, ge=1, le=10_000,
        description="failed reads (noread, misread, corrupt, lost, fault, forged) this reader may have in a row "
                    "before a flood window starts; refilled at flood_burst / flood_window per second")
    flood_window: float = Field(
        default=10.0, gt=0, le=3600, allow_inf_nan=False,
        description="seconds of a flood window: the failed reads beyond the burst are counted and journaled as "
                    "one read_failed when it ends")

    @field_validator("protocol")
    @classmethod
    def _known_protocol(cls, v: str) -> str:
        codecs.codec(v)  # ValueError naming the known protocols
        return v

    @model_validator(mode="after")
    def _port(self) -> "ScannerConfig":
        if self.kind == "serial" and not self.port:
            raise ValueError("a serial scanner needs 'port'")
        caps = self.capabilities
        if self.kind == "mqtt" and self.protocol != codecs.DEFAULT:
            raise ValueError(f"protocol = {self.protocol!r} is for serial scanners: an MQTT scanner gateway sends "
                             "studio.v1.scanner messages (docs/mqtt-topics.md)")
        if not caps.signing and (self.hmac_key_files or self.require_mac):
            raise ValueError(f"protocol {self.protocol!r} cannot authenticate frames: remove hmac_key_files and "
                             "require_mac (docs/scanner-protocol.md says what this protocol cannot detect)")
        if not caps.heartbeats and "heartbeat_timeout" in self.model_fields_set:
            raise ValueError(f"protocol {self.protocol!r} has no heartbeat, so heartbeat_timeout cannot apply: "
                             "remove it (the link counts as up while the port is open and readable)")
        if self.baudrate is None:
            self.baudrate = caps.default_baudrate
        return self

    @property
    def capabilities(self) -> codecs.Capabilities:
        """What the reader's protocol lets the backend detect (drivers/codecs)."""
        return codecs.codec(self.protocol).capabilities


class RtpBoundConfig(_Strict):
    """Declared RTP bounds of one bet type, in percent, as decimal strings: their decimals
    are their precision ("97.50" is met by 97.5028 %, dealer/games/rtp/report.py ``at_precision``)."""

    min: Decimal | None = None
    max: Decimal | None = None

    @field_validator("min", "max", mode="before")
    @classmethod
    def _percent(cls, v: object) -> object:
        if v is None:
            return None
        if isinstance(v, float) or isinstance(v, bool):
            raise ValueError(f"write the percentage as a string, e.g. \"97.50\" (its decimals are its precision), "
                             f"not {v!r}")
        try:
            d = Decimal(str(v).strip())
        except InvalidOperation:
            raise ValueError(f"expected a percentage such as \"97.50\", got {v!r}") from None
        if not d.is_finite() or d < 0 or d > 1000:
            raise ValueError(f"expected a percentage from 0 to 1000, got {v!r}")
        return d

    @model_validator(mode="after")
    def _order(self) -> "RtpBoundConfig":
        if self.min is None and self.max is None:
            raise ValueError("give min, max or both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} is above max {self.max}")
        return self


class RulesConfig(CoreRulesConfig):
    """The effective rules of a table, validated against this backend's games (:mod:`dealer.games`)."""

    games: ClassVar[GameLookup | None] = staticmethod(game_class)


class TableConfig(RulesConfig):
    id: str = Field(pattern=r"^[A-Za-z0-9_]{1,32}$")
    preferred_nodes: list[str] = Field(
        default_factory=list, description="with a PostgreSQL journal: the nodes this table should run on, in order "
        "of preference, while one of them is live (a serial scanner is wired to one host: name it here)")
    pause_seconds: float = Field(default=3.0, ge=0, le=3600, allow_inf_nan=False)
    auto_rounds: bool = True
    scanner: ScannerConfig
    rtp_policy: Literal["report", "strict"] = Field(
        default="report",
        description="at start-up the exact RTP of every bet is logged and exported; strict: a table with a bet "
                    "outside its declared bounds (rtp_bounds, else the game's declared maximum) does not open")
    rtp_bounds: dict[str, RtpBoundConfig] = Field(
        default_factory=dict, description="declared RTP bounds per bet type of `dealer rtp GAME` (percent strings)")

    @model_validator(mode="after")
    def _rtp(self) -> "TableConfig":
        from dealer.games.rtp import RTP_BETS

        bets = RTP_BETS.get(self.game)
        if bets is None:
            if self.rtp_bounds or self.rtp_policy == "strict":
                what = "rtp_bounds" if self.rtp_bounds else 'rtp_policy = "strict"'
                raise ValueError(f"{what}: the backend has no exact RTP report for {self.game} "
                                 f"(only for {', '.join(RTP_BETS)})")
            return self
        unknown = sorted(set(self.rtp_bounds) - set(bets))
        if unknown:
            raise ValueError(f"rtp_bounds for unknown bet types {unknown} (the RTP report of {self.game} has "
                             f"{list(bets)})")
        return self

    @model_validator(mode="after")
    def _configurable(self) -> "TableConfig":
        problem = game_class(self.game).from_options(self.options).check_config()
        if problem is not None:
            raise ValueError(f"options: {problem}")
        return self

    @model_validator(mode="after")
    def _shoe_reads_the_deck(self) -> "TableConfig":
        cards = self.scanner.capabilities.cards
        deck = game_class(self.game).from_options(self.options).deck
        if cards is not None and not deck <= cards:
            raise ValueError(f"scanner: a reader speaking protocol {self.scanner.protocol!r} cannot report the cards of "
                             f"{self.game} (e.g. {min(deck - cards)}): its protocol has no code for them")
        return self

    def rules(self) -> TableRules:
        """The table's rules as configured now, built through their canonical form (the same
        path a replay takes from the journal), with its hash and this software's version."""
        from dealer.core.rules import canonical_rules, rules_from_canonical, software_version

        return rules_from_canonical(self.id, canonical_rules(self), software_version(), games=game_class)


class MqttConfig(_Strict):
    url: str | None = Field(default=None, description="mqtt://host:port or mqtts://host:port (TLS); "
                            "required by dealer run unless in_process = true (or broker_urls is set)")
    broker_urls: list[str] = Field(
        default_factory=list,
        description="several brokers (e.g. the nodes of a broker cluster), instead of url: the backend connects "
                    "to the first and moves to the next when one fails (refused, or the connection lost), in turn; "
                    "url is then the first of them")
    in_process: bool = Field(default=False, description="no broker: an in-process bus that nothing outside "
                             "the process can reach (demos and tests only); excludes url")
    client_id: str = Field(default="", description="MQTT client id; unset = dealer-{service.node_id}, unique per "
                           "node (the node id already has to be: it names the node's status topic)")
    username: str | None = None
    password: str | None = None
    password_file: ConfigPath | None = Field(default=None, description="read the password from this file instead")
    keepalive: int = Field(default=10, ge=1)
    client: Literal["gmqtt", "paho"] = Field(
        default="gmqtt", description="the MQTT client library the backend speaks through: gmqtt (MQTT 3.1.1, a "
        "third of paho's CPU per message) or paho (aiomqtt 2, the client before issue 31: a rollback)")
    ca_file: ConfigPath | None = Field(default=None, description="CA bundle that signed the broker's certificate (mqtts)")
    cert_file: ConfigPath | None = Field(default=None, description="client certificate (mqtts, optional)")
    key_file: ConfigPath | None = Field(default=None, description="client private key (mqtts, optional)")
    allow_insecure: bool = Field(default=False, description="allow plain mqtt:// to a host that is not loopback")

    @field_validator("broker_urls")
    @classmethod
    def _urls(cls, v: list[str]) -> list[str]:
        from drivers.mqtt import parse_broker_url

        for i, url in enumerate(v):
            try:
                parse_broker_url(url)
            except ValueError as exc:
                raise ValueError(f"item {i + 1} of {len(v)}: {exc}") from None
        dup = sorted({u for u in v if v.count(u) > 1})
        if dup:
            raise ValueError(f"{', '.join(dup)} is named twice")
        return v

    @model_validator(mode="after")
    def _one_bus(self) -> "MqttConfig":
        if self.broker_urls and self.url is not None and self.url != self.broker_urls[0]:  # (a dump loads again)
            raise ValueError(f"url = {self.url!r} and broker_urls both name the broker: keep one (broker_urls for "
                             "several)")
        if self.in_process and (self.url is not None or self.broker_urls):
            raise ValueError(f"{'url' if self.url is not None else 'broker_urls'} and in_process = true name two "
                             "buses: keep one")
        if "broker_urls" in self.model_fields_set and not self.broker_urls:
            raise ValueError("broker_urls is empty: name at least one broker (or use url)")
        if self.broker_urls:
            self.url = self.broker_urls[0]
        elif self.url is not None:
            self.broker_urls = [self.url]
        return self

    @property
    def urls(self) -> list[str]:
        """Every broker the backend may connect to, in the order it tries them."""
        return list(self.broker_urls) or ([self.url] if self.url is not None else [])


#: The smallest ``max_message_bytes``. A manifest keeps every field but the bet ids; in the
#: seated games those are bounded by the seats: prompts, events, player messages and the
#: manifests are a few KB at most. A game whose results need more says so
#: (``Game.min_message_bytes``), and a backend with a table of it needs at least that.
MIN_MESSAGE_BYTES = 16_384


class ServiceSection(_Strict):
    node_id: str = Field(
        default="studio-host-1",
        description="this node's name: its status topic studio/v1/backends/{node_id}/status and its default client "
                    "id; letters, digits, '_', ':' and '-' (no '.': NATS refuses it in a topic and RabbitMQ turns it "
                    "into a topic level, docs/brokers.md)")
    journal_path: ConfigPath = Field(
        default=Path("dealer-journal.sqlite"), validate_default=True,
        description="the SQLite journal; a relative path (this default too) is relative to the config file's directory")
    journal_url: str | None = Field(
        default=None, description="postgresql://user@host:port/db: the journal and outbox in PostgreSQL, shared by "
        "several backend nodes that own tables by lease ([cluster]); unset = the SQLite file journal_path (one host). "
        "Put the password in the libpq password file (PGPASSFILE), not in this URL")
    fsync: bool = True
    metrics_enabled: bool = True
    metrics_addr: str = Field(default="127.0.0.1", description="bind address of /metrics; 0.0.0.0 for a remote Prometheus")
    metrics_port: int = Field(default=9108, ge=0, le=65535, description="0 = any free port")
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    journal_segment_rows: int = Field(
        default=100_000, ge=0, le=10_000_000,
        description="journal retention: settled rows roll into read-only segment files of this many rows "
                    "(<journal>.segments/, dealer/edge/segments.py); 0 = never roll")
    journal_retain_rows: int = Field(
        default=1_000_000, ge=1,
        description="the newest rows always kept in the live journal (a roll starts once it holds this many "
                    "plus journal_segment_rows); rows a replay needs are kept whatever this says")
    journal_anchor_seconds: float = Field(
        default=60.0, gt=0, le=86_400, allow_inf_nan=False,
        description="how often the journal's head (row id and hash) is published, retained, on "
                    "studio/v1/backends/{node_id}/journal when it moved (and at every roll and connect)")
    max_message_bytes: int = Field(
        default=131_072, ge=MIN_MESSAGE_BYTES, le=256 * 1024 * 1024,
        description="largest payload the backend publishes; keep it below the broker's max_packet_size (262144 in "
                    "deploy/mosquitto/mosquitto.conf) minus the topic. A larger result goes as a manifest plus parts; "
                    "any other message over it is not sent (logged, dealer_messages_oversize_total)")
    result_resend_seconds: float = Field(
        default=10.0, gt=0, le=3600, allow_inf_nan=False,
        description="a result settlement has not acknowledged is published again after this, then after twice as "
                    "long, up to result_resend_max_seconds (and at once after every broker reconnect)")
    result_resend_max_seconds: float = Field(default=300.0, gt=0, le=86400, allow_inf_nan=False,
                                             description="the longest wait between two publishes of one result")
    house_players: Literal["process", "thread"] = Field(
        default="process", description="where house players (the Matgo AI) think: 'process', a pool of worker "
        "processes, so the event loop of every table keeps its pace; 'thread', a thread of the backend (holds "
        "the GIL while it thinks: the old way, for comparison)")
    house_workers: int | None = Field(
        default=None, ge=1, le=64, description="worker processes of the house players; unset = one core left "
        "for the event loop, at most two")


    @field_validator("node_id")
    @classmethod
    def _node_id(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_:\-]{1,64}", v):
            raise ValueError(f"{v!r} must be 1 to 64 letters, digits, '_', ':' or '-': it is a level of the node's "
                             "topics, and a '.' is refused by NATS and turned into a level by RabbitMQ (docs/brokers.md)")
        return v


class ClusterSection(_Strict):
    """Table leases between backend nodes sharing a PostgreSQL journal (dealer/edge/leases.py)."""

    lease_seconds: float = Field(
        default=4.0, ge=1.0, le=300, allow_inf_nan=False,
        description="a node owns a table while it holds the table's lease; a lease not renewed for this long "
        "expires (the database's clock decides) and another node takes the table over: the failover time")
    renew_seconds: float | None = Field(
        default=None, gt=0, le=100, allow_inf_nan=False,
        description="how often a node renews its leases, sends its heartbeat and looks for tables to take; "
        "unset = a quarter of lease_seconds")
    max_clock_skew_seconds: float = Field(
        default=2.0, gt=0, le=60, allow_inf_nan=False,
        description="a node whose wall clock is further than this from the database's refuses to start (and "
        "alerts while running): round deadlines and journal times come from the node's clock")
    handover_wait_seconds: float = Field(
        default=120.0, ge=0, le=3600, allow_inf_nan=False,
        description="when tables are rebalanced (a node joins), a table moves only between rounds; after this "
        "long waiting for its round to end, it moves anyway (mid-round, resumed at the same position)")

    @property
    def renew(self) -> float:
        return self.renew_seconds if self.renew_seconds is not None else self.lease_seconds / 4

    @model_validator(mode="after")
    def _renew_inside_lease(self) -> "ClusterSection":
        if self.renew * 2 > self.lease_seconds:
            raise ValueError(f"renew_seconds = {self.renew} leaves less than two renewals per lease of "
                             f"{self.lease_seconds} s: one late renewal would lose every table")
        return self


class SupervisorConfig(_Strict):
    id: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.:\-]+$",
                    description="the supervisor id its signed commands carry (docs/mqtt-topics.md §10)")
    key_files: list[ConfigPath] = Field(min_length=1, description="files holding this supervisor's HMAC-SHA256 keys "
                                  "(hex); several during a key rotation: a command signed with any of them verifies")
    tables: list[str] = Field(default_factory=list, description="tables this supervisor may command; empty = every table")

    @field_validator("tables")
    @classmethod
    def _distinct(cls, v: list[str]) -> list[str]:
        if len(v) != len(set(v)):
            raise ValueError(f"a table is named twice in {v}")
        return v


class SecuritySection(_Strict):
    supervisor_max_age_seconds: float = Field(
        default=30.0, gt=0, le=3600, allow_inf_nan=False,
        description="a signed supervisor command issued longer ago than this (vs the receive time) is refused as stale")
    supervisor_max_skew_seconds: float = Field(
        default=5.0, ge=0, le=3600, allow_inf_nan=False,
        description="a signed supervisor command issued further than this in the future is refused")
    supervisors: list[SupervisorConfig] = Field(default_factory=list)

    @property
    def max_age_ms(self) -> int:
        return max(1, round(self.supervisor_max_age_seconds * 1000))

    @property
    def max_skew_ms(self) -> int:
        return round(self.supervisor_max_skew_seconds * 1000)

    @model_validator(mode="after")
    def _unique(self) -> "SecuritySection":
        ids = [s.id for s in self.supervisors]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            raise ValueError(f"duplicate supervisor ids: {', '.join(dup)}")
        return self


class WebConfig(_Strict):
    """``dealer web``: the dealer-station and pit-boss screens, and the WebSocket path by which they
    reach the broker (``dealer/web/server.py``). The pages log in to the broker with their own
    role's user, so the broker's ACL is the only gate; this process forwards bytes."""

    listen: str = Field(default="127.0.0.1:8080", description="HOST:PORT the pages are served on (port 0: any free "
                        "port). Browsers give WebCrypto (the supervisor's signing) only to https or to localhost: "
                        "anything else needs tls_cert_file and tls_key_file")
    broker_url: str | None = Field(default=None, description="the broker's MQTT listener the WebSocket path forwards "
                                   "to (mqtt:// or mqtts://); unset = [mqtt] url")
    ca_file: ConfigPath | None = Field(default=None, description="CA that signed the broker's certificate (mqtts); "
                                       "unset = [mqtt] ca_file")
    tls_cert_file: ConfigPath | None = Field(default=None, description="serve https/wss with this certificate")
    tls_key_file: ConfigPath | None = Field(default=None, description="... and this private key")
    max_connections: int = Field(default=256, ge=1, le=10_000, description="WebSocket connections at once; more are "
                                 "refused (503)")
    max_frame_bytes: int = Field(default=262_144, ge=1024, le=16_777_216, description="largest WebSocket message "
                                 "accepted from a browser; a larger one closes that connection")
    allow_insecure: bool = Field(default=False, description="serve plain http on an address that is not loopback "
                                 "(the pages' broker logins would cross the network in clear)")

    @field_validator("listen")
    @classmethod
    def _listen(cls, v: str) -> str:
        host, sep, port = v.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ValueError(f"{v!r} must be HOST:PORT (e.g. 127.0.0.1:8080)")
        return v

    @field_validator("broker_url")
    @classmethod
    def _broker(cls, v: str | None) -> str | None:
        if v is not None:
            from drivers.mqtt import parse_broker_url

            parse_broker_url(v)
        return v

    @model_validator(mode="after")
    def _tls_pair(self) -> "WebConfig":
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ValueError("tls_cert_file and tls_key_file go together: give both (https) or neither")
        return self

    @property
    def host_port(self) -> tuple[str, int]:
        host, _, port = self.listen.rpartition(":")
        return host.strip("[]"), int(port)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DEALER_", env_nested_delimiter="__", extra="forbid")

    service: ServiceSection = Field(default_factory=ServiceSection)
    mqtt: MqttConfig = Field(default_factory=MqttConfig)
    tables: list[TableConfig] = Field(default_factory=list)
    security: SecuritySection = Field(default_factory=SecuritySection)
    cluster: ClusterSection = Field(default_factory=ClusterSection)
    web: WebConfig = Field(default_factory=WebConfig)

    @model_validator(mode="after")
    def _unique(self) -> "Settings":
        if not self.mqtt.client_id:
            # Deterministic, not random: after a crash the restarted process takes over the old
            # connection's session at once (the broker drops it and fires its will before the
            # new "online"), where a fresh random id would leave the dead connection to time
            # out later and its will would mark the live backend offline. The backend uses a
            # clean session, so the id carries no session state either way.
            self.mqtt.client_id = f"dealer-{self.service.node_id}"
        ids = [t.id for t in self.tables]
        if len(ids) != len(set(ids)):
            raise ValueError(f"duplicate table ids in {ids}")
        readers = [t.scanner.reader_id for t in self.tables]
        if len(readers) != len(set(readers)):
            raise ValueError(f"duplicate scanner reader ids in {readers}")
        for game in sorted({t.game for t in self.tables}):
            cls, tables = game_class(game), [t.id for t in self.tables if t.game == game]
            if self.service.max_message_bytes < cls.min_message_bytes:
                why = f"{cls.min_message_why}; " if cls.min_message_why else ""
                raise ValueError(f"service.max_message_bytes = {self.service.max_message_bytes} is below "
                                 f"{cls.min_message_bytes}, which a {cls.min_message_title or game} result needs "
                                 f"({why}{game} table{'s' if len(tables) > 1 else ''} {', '.join(tables)})")
        for sup in self.security.supervisors:
            unknown = [t for t in sup.tables if t not in ids]
            if unknown:
                raise ValueError(f"security.supervisors: supervisor {sup.id} names table{'s' if len(unknown) > 1 else ''} "
                                 f"{', '.join(unknown)}, not in [[tables]] (tables: {', '.join(ids) or 'none'})")
        return self

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource) -> tuple[PydanticBaseSettingsSource, ...]:
        toml = _TOML_FILE.get("path")
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if toml is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml))
        return tuple(sources)


_TOML_FILE: dict[str, Path] = {}
#: Dots in one line of a configuration file, outside its strings and comments, beyond which it is
#: refused before the TOML parse: no setting is nested that deep, and ``tomllib`` takes time in
#: the square of a dotted key's parts (a 20,000-part key takes seconds).
MAX_LINE_DOTS = 64
_STRINGS_AND_COMMENT = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#.*')


def _too_nested(data: bytes) -> str | None:
    """Why the file is refused unparsed (a line nesting a key too deep), or None."""
    if data.count(b".") <= MAX_LINE_DOTS:
        return None
    for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
        dots = _STRINGS_AND_COMMENT.sub("", line).count(".")
        if dots > MAX_LINE_DOTS:
            return f"line {number} nests a key {dots} levels deep (a setting is a few levels deep at most)"
    return None


def load_settings(path: str | Path | None = None, **overrides: Any) -> Settings:
    """Load and validate; raise :class:`ConfigError` with every problem listed."""
    token = None
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file {p} does not exist" if not p.exists() else f"config {p} is not a file")
        _TOML_FILE["path"] = p
        token = _CONFIG_DIR.set(p.absolute().parent)
    try:
        nested = _too_nested(p.read_bytes()) if path is not None else None
        if nested is not None:
            raise ConfigError(f"invalid configuration: {nested}")
        return Settings(**overrides)
    except ValidationError as exc:
        raise ConfigError(f"invalid configuration: {validation_message(exc)}") from None
    except ValueError as exc:  # TOML syntax errors and the like
        raise ConfigError(f"invalid configuration: {' '.join(str(exc).split())}") from None
    except RecursionError:
        raise ConfigError("invalid configuration: the file is nested too deeply to be a configuration") from None
    except OSError as exc:  # unreadable file (permissions, a directory, ...)
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    finally:
        _TOML_FILE.pop("path", None)
        if token is not None:
            _CONFIG_DIR.reset(token)
