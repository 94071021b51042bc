"""Prometheus metrics for studio operations (names follow Prometheus conventions).

Each service owns its own :class:`CollectorRegistry` so several services (tests, the
benchmark) can run in one process. Labels are low-cardinality: table, game, result,
reason, link; never a round id or a card.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

# Fine buckets at the low end: the budget for scan-to-publish is a few milliseconds.
LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.02, 0.05, 0.1, 0.25, 1.0, 5.0)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.scan_reads = Counter("dealer_scan_reads", "Scanner inputs by result: ok, noread, misread, corrupt_frame, frame_lost, device_fault, "
                                  "foreign_card, duplicate_card, rejected (no card expected), burned (a burn set aside, dealt to no position)",
                                  ["table", "result"], registry=r)
        self.rescans = Counter("dealer_rescans", "RESCAN prompts sent to the dealer station, by reason",
                               ["table", "reason"], registry=r)
        self.alerts = Counter("dealer_supervisor_alerts", "Supervisor alerts raised", ["table", "reason"], registry=r)
        self.rounds = Counter("dealer_rounds", "Rounds finished, by outcome: completed, cancelled, voided",
                              ["table", "game", "outcome"], registry=r)
        self.rejections = Counter("dealer_rejected_events", "Events refused by the core (illegal or malformed)",
                                  ["table", "type"], registry=r)
        self.bad_messages = Counter("dealer_bad_messages", "Malformed messages received (bad JSON, schema)",
                                    ["topic_kind"], registry=r)
        self.scan_to_publish = Histogram("dealer_scan_to_publish_seconds",
                                         "From scanner bytes received to the card event acknowledged by the broker",
                                         buckets=LATENCY_BUCKETS, registry=r)
        self.journal_commit = Histogram("dealer_journal_commit_seconds", "SQLite journal group commit (fsync)",
                                        buckets=LATENCY_BUCKETS, registry=r)
        self.outbox_pending = Gauge("dealer_outbox_pending", "Outbox rows (results and result parts) waiting for "
                                    "settlement's acknowledgement", registry=r)
        self.outbox_oldest_age = Gauge("dealer_outbox_oldest_age_seconds", "Age of the oldest outbox row not yet "
                                       "acknowledged by settlement (0 when the outbox is empty)", registry=r)
        self.result_resends = Counter("dealer_result_resends", "Results published again because settlement had not "
                                      "acknowledged them: by reason, backoff (its resend timer) or reconnect (the "
                                      "broker link came back)", ["table", "reason"], registry=r)
        self.result_acks = Counter("dealer_result_acks", "Settlement acknowledgements on results/ack, by outcome: "
                                   "applied (the result leaves the outbox), repeat (already acknowledged: ignored), "
                                   "refused (without the result's SHA-256, or another one: a security event, the "
                                   "result stays)",
                                   ["table", "outcome"], registry=r)
        self.result_acks_unknown = Counter("dealer_result_acks_unknown", "Acknowledgements for an idempotency key "
                                           "this backend never produced for the table (or a malformed one): counted "
                                           "and ignored", ["table"], registry=r)
        self.link_up = Gauge("dealer_link_up", "1 when a link (broker, scanner) is up", ["link"], registry=r)
        self.broker_url_index = Gauge("dealer_broker_url_index", "Which of mqtt.broker_urls the backend is "
                                      "connected to (0 = the first); -1 while it is connected to none",
                                      registry=r)
        self.frames_rejected = Counter("dealer_frames_rejected",
                                       "Scanner frames that failed authentication, by reason: bad_mac, missing_mac, "
                                       "replayed_seq, replayed_boot (each raises a supervisor alert)",
                                       ["reader", "reason"], registry=r)
        self.player_actions = Counter("dealer_player_actions", "Betting actions in peer games (stud), by action and "
                                      "by whom: player, or timeout (a silent or disconnected player)",
                                      ["table", "action", "by"], registry=r)
        self.visibility_blocked = Counter("dealer_visibility_blocked",
                                          "Messages that would have shown a hidden card to their audience, by kind "
                                          "(event, prompt, player: withheld; result: delivered anyway, logged as "
                                          "an error)", ["kind"], registry=r)
        self.commands_refused = Counter("dealer_commands_refused", "Commands refused at the edge, by the role of the "
                                        "topic they came on and why: malformed, wrong_role, missing_command_id, "
                                        "missing_round_id, missing_turn, bad_signature, stale, reused_command_id ...",
                                        ["table", "role", "reason"], registry=r)
        self.command_repeats = Counter("dealer_command_repeats", "Commands whose id was already accepted: answered "
                                       "again, not applied again", ["table", "role"], registry=r)
        self.security_events = Counter("dealer_security_events", "Inputs refused for a security reason (journaled "
                                       "and alerted): bad or missing signature, unknown supervisor, stale, reused "
                                       "command id, another role's command", ["table", "kind"], registry=r)
        self.security_events_unjournaled = Counter(
            "dealer_security_events_unjournaled", "Security events over the journaling rate limit (a flood): "
            "counted and logged only", ["table"], registry=r)
        self.supervisor_key_uses = Counter("dealer_supervisor_key_uses", "Signed supervisor commands accepted, by "
                                           "supervisor and key (its fingerprint: 16 hex digits of a SHA-256, never the "
                                           "key; the backend logs each key file's at start and reload): during a "
                                           "rotation the old key can go once its count stops rising", ["supervisor", "key"], registry=r)
        self.supervisor_clock_refused = Counter(
            "dealer_supervisor_clock_refused", "Genuine (correctly signed) supervisor commands refused for their time, "
            "by cause: stale (issued longer ago than max_age) or future (issued ahead of this backend's clock): a "
            "clock step on the console or on this backend, or a replayed old command", ["table", "cause"], registry=r)
        self.supervisor_clock_offset = Gauge(
            "dealer_supervisor_clock_offset_seconds", "The last genuine supervisor command's issued_at minus the time "
            "this backend received it (the signing console's clock minus this backend's, transit included)",
            ["table"], registry=r)
        self.table_reader = Gauge("dealer_table_reader_info", "1 for each table this node runs, naming its "
                                  "scanner's reader and its game: join per-table series to readers, e.g. rescans "
                                  "per reader: sum by (reader) (rate(dealer_rescans_total[5m]) * on (table) "
                                  "group_left (reader) dealer_table_reader_info)", ["table", "reader", "game"],
                                  registry=r)
        self.reloads = Counter("dealer_config_reloads", "Configuration reloads (SIGHUP), by outcome: applied, or "
                               "refused (nothing changed: the log line says why)", ["outcome"], registry=r)
        for outcome in ("applied", "refused"):
            self.reloads.labels(outcome=outcome)
        self.table_operations = Counter(
            "dealer_table_operations", "Supervisors' signed table operations that reached the table, by operation "
            "(open_round, pause, resume, close, reopen) and outcome: applied, refused (not applicable now: a round "
            "in play, already paused, a closed table ...), repeat (a command id already applied: answered again). "
            "Commands refused at the edge (signature, freshness, table) are in dealer_commands_refused",
            ["table", "operation", "outcome"], registry=r)
        self.table_operating = Gauge(
            "dealer_table_operating", "1 for the table's operating state (open, paused, closing, closing_paused, "
            "closed), 0 for the others", ["table", "state"], registry=r)
        self.scanner_notices = Counter(
            "dealer_scanner_notices", "What a serial reader's line carried besides reads, by reader and kind: "
            "corrupt (a damaged frame), foreign (another reader's frame), forged, device_warning (a shoe's hardware "
            "warning such as a Bee-Tek <W0x01>: logged and counted, it changes nothing)", ["reader", "kind"],
            registry=r)
        self.flood_suppressed = Counter(
            "dealer_scanner_flood_suppressed", "Failed scanner reads held back by the reader's flood limiter, by reader "
            "and kind (noread, misread, corrupt_frame, frame_lost, device_fault, forged_frame): each flood window is "
            "journaled as one read_failed that carries the count", ["reader", "kind"], registry=r)
        self.queue_dropped = Counter(
            "dealer_queue_dropped", "Items dropped because the input queue was at its cap, by kind: scanner_failure, "
            "security_event (card reads, accepted commands and internal events are never dropped)", ["kind"],
            registry=r)
        self.queue_depth = Gauge("dealer_queue_depth", "Items waiting in the input queue after the last batch was "
                                 "taken", registry=r)
        self.journal_writable = Gauge("dealer_journal_writable", "1 while group commits succeed; 0 from a failed "
                                      "commit (disk full, I/O error) until the retried batch commits: meanwhile "
                                      "input is refused (journal_unavailable) and decision/turn timers pause",
                                      registry=r)
        self.journal_writable.set(1)
        self.journal_commit_failures = Counter(
            "dealer_journal_commit_failures", "Failed group commit attempts (every retry counts), by reason: "
            "disk_full, io_error, read_only, busy, corrupt, cant_open, constraint, other", ["reason"], registry=r)
        self.journal_bytes = Gauge("dealer_journal_bytes", "Size of the live journal: database, WAL and WAL index "
                                   "files", registry=r)
        self.journal_disk_free = Gauge("dealer_journal_disk_free_bytes", "Bytes available to the backend in the "
                                       "journal directory's file system (statvfs)", registry=r)
        self.journal_disk_size = Gauge("dealer_journal_disk_size_bytes", "Size of the journal directory's file "
                                       "system (statvfs), for free-space ratios", registry=r)
        self.journal_segments = Counter("dealer_journal_segments", "Journal segments rolled into read-only "
                                        "segment files (dealer/edge/segments.py)", registry=r)
        self.journal_rows_rolled = Counter("dealer_journal_rows_rolled", "Journal rows moved from the live journal "
                                           "into segment files", registry=r)
        self.journal_roll_failures = Counter("dealer_journal_roll_failures", "Journal rolls that failed (logged; "
                                             "nothing is lost: the rows stay in the live journal and the roll is "
                                             "tried again later)", registry=r)
        self.journal_segment_files = Gauge("dealer_journal_segment_files", "Segment files recorded in the journal",
                                           registry=r)
        self.publish_failures = Counter("dealer_publish_failures", "Non-durable publishes dropped while the bus was down",
                                        ["kind"], registry=r)
        self.table_rtp = Gauge("dealer_table_rtp_ratio", "Exact return to player of each bet type of a table's "
                               "pay table (1 = 100 %), computed at start-up by complete enumeration (dealer rtp); "
                               "games without an RTP report have none", ["table", "game", "bet_type"], registry=r)
        self.messages_oversize = Counter("dealer_messages_oversize", "Messages over [service] max_message_bytes, "
                                         "never sent: by kind (event, prompt, player; result: a manifest that "
                                         "cannot be brought under the limit, kept in the outbox)", ["kind"], registry=r)

        self.table_owned = Gauge("dealer_table_owned", "1 while this node owns the table (adopted, not dropped): "
                                 "with a PostgreSQL journal, by lease; with SQLite, every configured table",
                                 ["table"], registry=r)
        self.table_moves = Counter("dealer_table_moves", "Tables this node adopted or dropped, by direction "
                                   "(adopted, dropped) and reason (start, lease, handover, lease_lost, fenced, "
                                   "sigterm ...)", ["direction", "reason"], registry=r)
        self.journal_fenced = Counter("dealer_journal_fenced", "Group commits the journal refused because this "
                                      "node no longer held a table's lease at the epoch it wrote (another node "
                                      "took the table over): the table is dropped, its effects never released",
                                      ["table"], registry=r)
        self.output_suppressed = Counter("dealer_output_suppressed", "Effects, publishes and timers of a table "
                                         "withheld because this node's lease of it was not valid at that moment "
                                         "(paused past its lease, or the table just moved), by kind",
                                         ["kind"], registry=r)
        self.stale_inputs = Counter("dealer_stale_inputs", "Inputs refused because they came in while this "
                                    "node held the table under an earlier lease (or none) and the table was "
                                    "taken again since: answered table moved, never applied", ["table"], registry=r)

    def serve(self, port: int, addr: str = "127.0.0.1") -> int:
        """Serve ``/metrics`` over HTTP; returns the bound port (``port=0`` picks a free one)."""
        server, _thread = start_http_server(port, addr=addr, registry=self.registry)
        return int(server.server_address[1])


class ScannerKeyUses:
    """``dealer_scanner_key_uses_total{reader,key}``: frames each reader's key verified, the key
    named by its fingerprint (drivers.frames.key_fingerprint), read from the readers'
    authenticators at scrape time (they count; a reload keeps a kept key's count). During a
    rotation the old key can go once its count stops rising."""

    def __init__(self, readers: Any) -> None:
        self._readers = readers  # () -> [(reader id, FrameAuthenticator)]

    def collect(self) -> Any:
        from prometheus_client.core import CounterMetricFamily

        family = CounterMetricFamily("dealer_scanner_key_uses", "Scanner frames verified, by reader and key "
                                     "fingerprint: retire a rotated key once its count stops rising",
                                     labels=["reader", "key"])
        for reader, auth in self._readers():
            for fingerprint, count in zip(auth.fingerprints, auth.verified):
                family.add_metric([reader, fingerprint], count)
        yield family
