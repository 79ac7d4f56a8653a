"""A Trio actor runtime: actors with bounded two-lane mailboxes, run by OTP-style supervisors.

Everything public is re-exported here; the modules behind it are private. See `docs/actors.md`
for the model and the restart rules.
"""

from ._actor import Actor as Actor
from ._checkpoint import CheckpointStore as CheckpointStore
from ._checkpoint import InMemoryCheckpointStore as InMemoryCheckpointStore
from ._dead_letters import DEFAULT_DEAD_LETTER_HISTORY as DEFAULT_DEAD_LETTER_HISTORY
from ._dead_letters import DeadLetter as DeadLetter
from ._dead_letters import DeadLetterReason as DeadLetterReason
from ._dead_letters import DeadLetters as DeadLetters
from ._exceptions import ActorError as ActorError
from ._exceptions import ActorStopped as ActorStopped
from ._exceptions import AskTimeout as AskTimeout
from ._exceptions import MailboxFull as MailboxFull
from ._exceptions import SupervisorEscalation as SupervisorEscalation
from ._incarnation import DEFAULT_STOP_TIMEOUT as DEFAULT_STOP_TIMEOUT
from ._incarnation import DEFAULT_THROUGHPUT as DEFAULT_THROUGHPUT
from ._mailbox import DEFAULT_MAILBOX_SIZE as DEFAULT_MAILBOX_SIZE
from ._mailbox import MailboxStatistics as MailboxStatistics
from ._ref import DEFAULT_ASK_TIMEOUT as DEFAULT_ASK_TIMEOUT
from ._ref import ActorRef as ActorRef
from ._restart import DEFAULT_BACKOFF as DEFAULT_BACKOFF
from ._restart import DEFAULT_INTENSITY as DEFAULT_INTENSITY
from ._restart import Backoff as Backoff
from ._restart import Restart as Restart
from ._restart import RestartIntensity as RestartIntensity
from ._restart import Strategy as Strategy
from ._statistics import SupervisorStatistics as SupervisorStatistics
from ._supervisor import DEFAULT_SHUTDOWN_TIMEOUT as DEFAULT_SHUTDOWN_TIMEOUT
from ._supervisor import Supervisor as Supervisor
from ._supervisor import open_supervisor as open_supervisor

__all__ = [
    "Actor",
    "ActorError",
    "ActorRef",
    "ActorStopped",
    "AskTimeout",
    "Backoff",
    "CheckpointStore",
    "DEFAULT_ASK_TIMEOUT",
    "DEFAULT_BACKOFF",
    "DEFAULT_DEAD_LETTER_HISTORY",
    "DEFAULT_INTENSITY",
    "DEFAULT_MAILBOX_SIZE",
    "DEFAULT_SHUTDOWN_TIMEOUT",
    "DEFAULT_STOP_TIMEOUT",
    "DEFAULT_THROUGHPUT",
    "DeadLetter",
    "DeadLetterReason",
    "DeadLetters",
    "InMemoryCheckpointStore",
    "MailboxFull",
    "MailboxStatistics",
    "Restart",
    "RestartIntensity",
    "Strategy",
    "Supervisor",
    "SupervisorEscalation",
    "SupervisorStatistics",
    "open_supervisor",
]
