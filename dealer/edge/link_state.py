"""A table's live links (its scanner, the broker) as their drivers last reported them, and
the name of a table's scanner link: read by the publisher, the timers and link tracking."""

from __future__ import annotations

from dataclasses import dataclass, field

from dealer.edge.config import TableConfig


def scanner_link(cfg: TableConfig) -> str:
    """The link name of a table's scanner."""
    return f"scanner:{cfg.scanner.reader_id}"


@dataclass(slots=True)
class Links:
    """Live link state of one table, as its drivers last reported it (never journaled)."""

    up: dict[str, bool | None] = field(default_factory=dict)  # None: not reported yet
    reason: dict[str, str] = field(default_factory=dict)  # why the last report said down

    @property
    def ready(self) -> bool:
        return all(v is True for v in self.up.values())

    def waiting_for(self) -> str | None:
        """What the table waits for, for its station ("reader SC1: not heard since start"), or None."""
        parts = []
        for link, up in sorted(self.up.items()):
            if up is True:
                continue
            who = f"reader {link.split(':', 1)[1]}" if link.startswith("scanner:") else f"the {link}"
            why = "not heard since start" if up is None else f"down ({self.reason.get(link) or 'no reason given'})"
            parts.append(f"{who}: {why}")
        return "; ".join(parts) or None
