"""alallo: fine-tuning jobs as Trio actors, watched live.

The embedding API is :class:`Runtime` with :class:`Settings`; the HTTP
client is :class:`alallo.client.Client`; the command line is ``alallo``.
"""

from ._errors import AlalloError as AlalloError
from ._errors import Conflict as Conflict
from ._errors import InvalidFile as InvalidFile
from ._errors import InvalidRequest as InvalidRequest
from ._errors import InvalidTransition as InvalidTransition
from ._errors import NotFound as NotFound
from ._errors import Unauthorized as Unauthorized
from ._job import Event as Event
from ._job import Job as Job
from ._job import LogLine as LogLine
from ._runtime import LOCAL_ACCOUNT as LOCAL_ACCOUNT
from ._runtime import Runtime as Runtime
from ._spec import JobSpec as JobSpec
from ._status import EventType as EventType
from ._status import JobStatus as JobStatus
from ._status import Message as Message
from .settings import Settings as Settings

__all__ = [
    "LOCAL_ACCOUNT",
    "AlalloError",
    "Conflict",
    "Event",
    "EventType",
    "InvalidFile",
    "InvalidRequest",
    "InvalidTransition",
    "Job",
    "JobSpec",
    "JobStatus",
    "LogLine",
    "Message",
    "NotFound",
    "Runtime",
    "Settings",
    "Unauthorized",
]
