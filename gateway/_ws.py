"""``GET /v1/ws``: the streams of API.md over one WebSocket.

The client sends ``{"subscribe": ["ft-…", ...] | "*", "after": {"ft-…": seq, "*": position}}``
(more than one such message adds subscriptions). The server sends JSON
text frames ``{"stream": "job"|"event"|"log"|"metrics", "seq", "data", "subscription"}``:
for a job, exactly the items of its SSE stream, with the job's sequence
numbers; for ``"*"``, the account stream's ``job`` items, whose ``seq`` is the
feed position. ``subscription`` is the job id or ``"*"`` the frame belongs to
(a log line names no job), the key of ``after`` to resume it. Resuming works
as with SSE: ``after`` per job (or ``"*"``) gives what came after that point,
nothing twice.

Besides the items, one frame per situation:

- ``{"stream": "done", "seq": N, "data": {"id", "status", "seq"}}`` when a
  job's stream ended after its final state (at once if ``after`` is already
  at or past it, as SSE answers 204). When every subscription is done and
  ``"*"`` is not among them, the server closes with code 1000.
- ``{"stream": "error", "seq": null, "data": {"error": {...}, "job_id"}}``:
  a job that does not exist (the other subscriptions go on), or a message
  that is not a valid subscription (then the server closes with 4422; a
  message nested deeper than :data:`alallo._json.MAX_JSON_DEPTH` gets code
  ``invalid_json`` and the close carries the message as its reason; an
  ``after`` outside ``[0, 2**62)`` is refused as SSE refuses it, ``param``
  ``after.<key>``). A missing or wrong key closes with 4401 after such a frame.
- Limits (``Settings``): a socket follows at most ``max_subscriptions_per_websocket``
  subscriptions at once (a job's ends with its ``done``), and the socket and each
  subscription are streams of the account (``max_streams_per_account``, with its SSE
  streams). A ``subscribe`` message past either is refused whole with an error frame
  (code ``too_many_streams``, ``param`` ``subscribe``), and the socket goes on with what
  it follows; a socket the account has no room for gets that frame, then close 4429
  with the reason. So one socket holds a bounded number of tasks and buffers, and when it
  closes they all go (each subscription's task, bus subscription and account slot end
  with the socket's nursery). A client that keeps sending while it leaves
  :data:`ANSWERS_UNREAD` of the server's answers unread loses its subscriptions and is
  closed with 1008 once the frames queued before are out.
- ``{"stream": "shutdown", "seq": null, "data": {}}`` then close 1001 when
  the server stops.

After a client disconnects, Hypercorn turns sends into no-ops
(research/sse-and-streaming.md §0.4), so one task waits on ``receive`` and
ends the whole connection when the client goes. A client that stops reading
holds up only its own tasks, as for SSE.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import trio
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictInt, ValidationError
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketDisconnected

from alallo import AlalloError, NotFound, Unauthorized
from alallo._json import NestingTooDeep, loads_request
from alallo.runtime import Item

from ._auth import account_of, runtime_of
from ._limits import TooManyStreams
from ._metrics import Metrics, open_stream
from ._sse import MAX_RESUME_POINT

__all__ = ["Subscribe", "websocket_stream"]

OUTGOING_BUFFER = 16
"""Frames queued for a client before the streams feeding it wait (and lag)."""

ANSWERS_UNREAD = 64
"""The socket's answers to the client's messages (refusals) it may leave unread while it
sends more; past them it floods (see ``read`` in :func:`_serve`)."""


def _resume_point(value: int) -> int:
    if not 0 <= value < MAX_RESUME_POINT:
        raise ValueError(f"must be between 0 and 2**62, got {value}")
    return value


class Subscribe(BaseModel):
    """A client's subscription message (strict, as every request body: no number from a
    boolean or a string)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    subscribe: list[str] | Literal["*"] = Field(min_length=1)
    """Job ids to follow, or ``"*"`` for every job of the account."""
    after: dict[str, Annotated[StrictInt, AfterValidator(_resume_point)]] = Field(
        default_factory=dict)
    """Where to resume, per job id (a ``seq``) and for ``"*"`` (a feed position): an integer
    in ``[0, 2**62)``, as SSE's ``Last-Event-ID``."""


def _frame(stream: str, seq: int | None, data: Mapping[str, Any]) -> dict[str, Any]:
    return {"stream": stream, "seq": seq, "data": data}


def _job_frame(item: Item) -> str:
    """A job stream's item as its text frame, ``subscription`` being the job: the same
    for every client following the job, so encoded once per item (:meth:`Item.encoded`)."""
    return item.encoded("ws", _encode_job_frame).decode()


def _encode_job_frame(item: Item) -> bytes:
    return _text(item.job_id, item).encode()


def _text(subscription: str, item: Item) -> str:
    # The keys in the order of _frame's, ``data`` spliced in as the item's own JSON.
    return (f'{{"stream":{json.dumps(item.kind)},"seq":{item.seq},"data":{item.json()},'
            f'"subscription":{json.dumps(subscription)}}}')


def _error(exc: AlalloError, job_id: str | None = None) -> dict[str, Any]:
    error = {"code": exc.code, "message": exc.message, "param": exc.param}
    return _frame("error", None, {"error": error, "job_id": job_id})


def _invalid(exc: ValidationError | ValueError) -> dict[str, Any]:
    """The error frame of a message that is no valid subscription: ``param`` the field
    pydantic names (``after.ft-…``), ``subscribe`` for a message that is no JSON object."""
    param, reason = "subscribe", str(exc)
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        param = ".".join(str(part) for part in first["loc"]) or param
        reason = f"{param}: {str(first['msg']).removeprefix('Value error, ')}"
    message = (f"expected {{\"subscribe\": [job ids] | \"*\", \"after\": {{id: seq}}}}: "
               f"{reason}")
    return _frame("error", None, {"error": {"code": "invalid_request", "param": param,
                                            "message": message}, "job_id": None})


async def _followers(*, task_status: trio.TaskStatus[trio.Nursery]) -> None:
    """A nursery for one socket's subscriptions, open until cancelled (a flooding client
    loses them all at once, the socket's other tasks go on)."""
    async with trio.open_nursery() as followers:
        task_status.started(followers)
        await trio.sleep_forever()


async def websocket_stream(websocket: WebSocket) -> None:
    """Serve one WebSocket client until it leaves, its jobs end, or the server stops."""
    await websocket.accept()
    try:
        account = await account_of(websocket)
    except Unauthorized as exc:
        await websocket.send_json(_error(exc))
        await websocket.close(code=4401)
        return
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(open_stream(websocket.app, "websocket", account))
        except TooManyStreams as exc:
            await websocket.send_json(_error(exc))
            await websocket.close(code=4429, reason="too many streams open for this account")
            return
        await _serve(websocket, account)


async def _serve(websocket: WebSocket, account: str) -> None:
    """Follow what the client subscribes to, until it leaves, its jobs end, or the server
    stops; the socket is already one of the account's streams."""
    runtime = runtime_of(websocket)
    stopping: trio.Event = websocket.app.state.stopping
    metrics: Metrics = websocket.app.state.metrics
    most = runtime.settings.max_subscriptions_per_websocket
    # Items go out as text encoded once per item; the other frames as dicts.
    send_out, receive_out = trio.open_memory_channel[str | dict[str, Any]](OUTGOING_BUFFER)
    live = 0  # job subscriptions not yet done
    everything = False  # subscribed to "*"

    def room_for(count: int) -> TooManyStreams | None:
        """Hold ``count`` more subscriptions (each one of the account's streams), or say
        why not; each follower gives its own back when it ends."""
        following = live + everything
        if following + count > most:
            refused = TooManyStreams(
                f"this WebSocket follows {following} subscriptions and the message asks for "
                f"{count} more; the limit is {most} (ALALLO_MAX_SUBSCRIPTIONS_PER_WEBSOCKET): "
                "a job's subscription ends with its done frame; follow every job with \"*\", "
                "or open another WebSocket", param="subscribe")
        else:
            try:
                metrics.streams.open(account, count)
                return None
            except TooManyStreams as exc:
                refused = TooManyStreams(exc.message, param="subscribe")
        metrics.refused_streams.labels("subscription").inc(count)
        return refused

    async def follow_job(job_id: str, after: int) -> None:
        nonlocal live
        try:
            job = await runtime.get_job(account, job_id)
            last: dict[str, Any] = {"id": job_id, "status": job.status.value,
                                    "seq": job.state_seq}
            if not (job.status.is_final and after >= job.state_seq):
                async for item in runtime.stream(account, job_id, after=after):
                    await send_out.send(_job_frame(item))
                    if item.kind == "job":
                        last = {"id": job_id, "status": item.data["status"],
                                "seq": item.seq}
            await send_out.send(_frame("done", last["seq"], last))
        except NotFound as exc:
            await send_out.send(_error(exc, job_id))
        finally:
            live -= 1
            metrics.streams.close(account)
        if live == 0 and not everything:
            await send_out.send(_frame("close", None, {}))

    async def follow_account(after: int) -> None:
        try:
            async for item in runtime.stream_jobs(account, after=after):
                await send_out.send(_text("*", item))
        finally:
            metrics.streams.close(account)

    answers, answers_out = trio.open_memory_channel[dict[str, Any]](ANSWERS_UNREAD)

    def say(frame: dict[str, Any]) -> bool:
        """Queue the reader's answer to a message; False when the client has left
        ANSWERS_UNREAD of them unread (the reader never waits on the client: see ``read``)."""
        try:
            answers.send_nowait(frame)
        except trio.WouldBlock:
            return False
        return True

    async def relay() -> None:
        """The reader's answers, out in turn with the streams' frames."""
        async for frame in answers_out:
            await send_out.send(frame)

    async def read(nursery: trio.Nursery) -> None:
        # The reader never waits for the client to read. Hypercorn holds a few messages
        # for the app, and once they are unread it stops reading the connection, also its
        # close; and when the client has gone, a send waits (shielded) until the app takes
        # the disconnect. A reader waiting on a full outgoing buffer then waits for the
        # writer, which waits for the reader: the socket and its subscriptions were held
        # until the server stopped (issue 31, a flood of 20,000 subscribe messages). So
        # its answers are queued without waiting, and a client that sends while leaving
        # ANSWERS_UNREAD of them unread loses its subscriptions and is closed with 1008;
        # the reader reads on until the client's close comes.
        flooded = False
        while True:
            try:
                text = await websocket.receive_text()
            except (WebSocketDisconnect, WebSocketDisconnected):  # gone, or closed by us
                nursery.cancel_scope.cancel()
                return
            if flooded:
                continue
            try:
                message = Subscribe.model_validate(loads_request(text))
            except NestingTooDeep as exc:
                reason = f"the message is {exc}"
                frames = [_frame("error", None, {"error": {
                    "code": "invalid_json", "message": reason, "param": None},
                    "job_id": None}), _frame("close", None, {"code": 4422, "reason": reason})]
            except (ValidationError, ValueError) as exc:
                frames = [_invalid(exc), _frame("close", None, {"code": 4422})]
            else:
                frames = subscribe(message, nursery)
            if not all(say(frame) for frame in frames):
                flooded = True
                followers.cancel_scope.cancel()
                closing.set()

    def subscribe(message: Subscribe, nursery: trio.Nursery) -> list[dict[str, Any]]:
        """Start following what ``message`` asks for; the frames to answer it with."""
        nonlocal live, everything
        if message.subscribe == "*":
            if not everything:
                if (refused := room_for(1)) is not None:
                    return [_error(refused)]
                everything = True
                followers.start_soon(follow_account, message.after.get("*", 0))
            return []
        job_ids = list(dict.fromkeys(message.subscribe))
        if (refused := room_for(len(job_ids))) is not None:
            return [_error(refused)]
        for job_id in job_ids:
            live += 1
            followers.start_soon(follow_job, job_id, message.after.get(job_id, 0))
        return []

    async def write(nursery: trio.Nursery) -> None:
        async for frame in receive_out:
            if closing.is_set():
                await websocket.close(code=1008, reason="the client sent messages while "
                                      f"leaving {ANSWERS_UNREAD} answers unread")
                break
            if isinstance(frame, str):
                await websocket.send_text(frame)
                continue
            if frame["stream"] == "close":
                await websocket.close(code=frame["data"].get("code", 1000),
                                      reason=frame["data"].get("reason"))
                break
            await websocket.send_json(frame)
        nursery.cancel_scope.cancel()

    async def farewell(nursery: trio.Nursery) -> None:
        await stopping.wait()
        with trio.move_on_after(1):  # a client that does not read gets no goodbye
            await send_out.send(_frame("shutdown", None, {}))
            await send_out.send(_frame("close", None, {"code": 1001}))
            return
        nursery.cancel_scope.cancel()

    closing = trio.Event()  # the client floods: close once the frames queued are out
    async with trio.open_nursery() as nursery:
        followers = await nursery.start(_followers)
        nursery.start_soon(read, nursery)
        nursery.start_soon(relay)
        nursery.start_soon(write, nursery)
        nursery.start_soon(farewell, nursery)
