"""Whether the journal can be written now, as the commit loop last found it.

The commit loop (dealer/edge/commit_loop.py) owns it; the inputs refuse input, the timers pause
and link tracking holds its resync while :attr:`CommitState.writable` is False.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: The ``kind`` of a refusal (and of a scanner input not taken) while the journal cannot be written.
JOURNAL_UNAVAILABLE = "journal_unavailable"


@dataclass
class CommitState:
    """The journal's availability and the resumes it waits for."""

    #: False from a failed group commit until its batch commits.
    writable: bool = True
    #: Tables whose Resume is queued but not applied yet (after a journal outage, or any Resume
    #: the service submits: the table adopted, the first broker connect): their decision and turn
    #: timers stay paused until it is (the old deadlines passed while nobody could act).
    resume_queued: set[str] = field(default_factory=set)
    #: The bus reconnected during the outage: private messages go again when it ends.
    resync_due: bool = False
