from __future__ import annotations

import actors


def test_every_exception_is_rooted_at_actor_error() -> None:
    for exc in (
        actors.ActorStopped,
        actors.AskTimeout,
        actors.MailboxFull,
        actors.SupervisorEscalation,
    ):
        assert issubclass(exc, actors.ActorError)
    assert issubclass(actors.ActorError, Exception)
