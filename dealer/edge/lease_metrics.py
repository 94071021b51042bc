"""The lease manager's metrics (dealer/edge/leases.py), registered once per registry."""

from __future__ import annotations

import weakref

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from dealer.edge.metrics import LATENCY_BUCKETS


class LeaseMetrics:
    """The lease metrics, registered once per registry (a service's :class:`Metrics`)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.held = Gauge("dealer_table_lease_held", "1 while this node holds the table's lease", ["table"],
                          registry=r)
        self.epoch = Gauge("dealer_lease_epoch", "The epoch of the table's lease as this node last took it "
                           "(the fencing token its journal rows carry)", ["table"], registry=r)
        self.acquisitions = Counter("dealer_lease_acquisitions", "Leases taken, by reason: placement (placed "
                                    "here and free), expired (placed here, its holder's lease ran out), orphaned "
                                    "(placed on a node that did not take it for a whole lease)",
                                    ["table", "reason"], registry=r)
        self.losses = Counter("dealer_lease_losses", "Leases given up or lost, by reason: handover, shutdown, "
                              "lost (not renewed: taken over or expired), fenced (the journal was refused), "
                              "unreachable (the database did not answer for a lease), expired_locally (no renewal "
                              "answered in time, or the process was paused), journal_unwritable (this node could not "
                              "write its journal for a lease: given up to the others), superseded, adopt_failed",
                              ["table", "reason"], registry=r)
        self.nodes_live = Gauge("dealer_cluster_nodes_live", "Backend nodes heard within a lease and not leaving, "
                                "as this node last read them", registry=r)
        self.clock_skew = Gauge("dealer_clock_skew_seconds", "This node's wall clock minus the database's "
                                "(measured at every renewal; beyond [cluster] max_clock_skew_seconds a node "
                                "refuses to start and logs an error while running)", registry=r)
        self.renew_failures = Counter("dealer_lease_renew_failures", "Renewals (heartbeat and every lease, one "
                                      "statement) that failed for want of the database", registry=r)
        self.unknown_holders = Counter("dealer_lease_unknown_holders", "Leases found held by a node that has no "
                                       "row in nodes (counted once per table and holder): taken over only once "
                                       "they expire", ["table"], registry=r)
        self.database_up = Gauge("dealer_lease_database_up", "1 while the lease database answers", registry=r)
        self.statement = Histogram("dealer_lease_statement_seconds", "Lease statements' round trips, by "
                                   "statement: renew, read, acquire, release", ["statement"],
                                   buckets=LATENCY_BUCKETS, registry=r)


_BY_REGISTRY: weakref.WeakKeyDictionary[CollectorRegistry, LeaseMetrics] = weakref.WeakKeyDictionary()


def lease_metrics(registry: CollectorRegistry) -> LeaseMetrics:
    """The registry's lease metrics (created at the first call)."""
    m = _BY_REGISTRY.get(registry)
    if m is None:
        m = _BY_REGISTRY[registry] = LeaseMetrics(registry)
    return m
