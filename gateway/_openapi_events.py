"""The events of the API's ``text/event-stream`` answers, as ``/openapi.json`` states them.

Each stream's ``schema`` is that of one event, as an SSE parser reads it: an object of
``event`` (``message`` when the frame names none), ``data``, and, where the frame or one
before it carried them, ``id`` and ``retry`` (WHATWG HTML §9.2.6). ``data`` is a string
of JSON; ``contentMediaType`` and ``contentSchema`` (JSON Schema 2020-12 §8) say whose
JSON, by event: for a job's stream (:mod:`gateway._sse`) ``job``, ``event``, ``log``,
``metrics``, then ``done``, or ``shutdown`` when the server stops; for a streamed completion
(:mod:`gateway._completions`) OpenAI's chunks, an error part way, then ``[DONE]``, which is no
JSON. This is how tools read an event stream's schema in OpenAPI 3.1 (schemathesis among
them); OpenAPI 3.2 names the same schema ``itemSchema``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from alallo import api

__all__ = ["EVENT_SHAPES", "event_schema"]

Ref = Callable[[type], dict[str, Any]]

EVENT_SHAPES: dict[str, dict[str, type]] = {
    "job": {"job": api.FineTuningJob, "event": api.JobEvent, "log": api.TrainingLogLine,
            "metrics": api.MetricsReport, "done": api.StreamDone},
    "account": {"job": api.FineTuningJob},
    "chat": {"message": api.ChatCompletionChunk},
    "text": {"message": api.TextCompletionChunk},
}
"""By stream, its events' names and the shapes of their ``data`` (``shutdown``, data
``{}``, ends the job streams too; a completion stream may end with a
:class:`alallo.api.StreamError` instead of its ``[DONE]``)."""

_SEQ = {"type": "string", "pattern": "^[0-9]+$"}
_RETRY = {"type": "integer", "minimum": 0}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "string", "contentMediaType": "application/json", "contentSchema": schema}


def _event(name: str, data: dict[str, Any], *, with_id: bool) -> dict[str, Any]:
    """One kind of event; ``with_id``: its frame carries an ``id`` (else the parser may
    repeat the last one it saw)."""
    return {"type": "object", "additionalProperties": False,
            "required": ["event", "data", "id"] if with_id else ["event", "data"],
            "properties": {"event": {"const": name}, "data": data, "id": _SEQ,
                           "retry": _RETRY}}


def event_schema(stream: str, ref: Ref) -> dict[str, Any]:
    """The schema of one event of ``stream`` (a key of :data:`EVENT_SHAPES`), its shapes
    named by ``ref`` (a shape → its ``$ref``)."""
    shapes = EVENT_SHAPES[stream]
    if stream in ("chat", "text"):
        (chunk,) = shapes.values()
        data = {"type": "string", "if": {"const": "[DONE]"},
                "else": _json({"anyOf": [ref(chunk), ref(api.StreamError)]})}
        return {"type": "object", "additionalProperties": False, "required": ["event", "data"],
                "properties": {"event": {"const": "message"}, "data": data}}
    events = [_event(name, _json(ref(shape)), with_id=name != "done")
              for name, shape in shapes.items()]
    events.append(_event("shutdown", _json({"type": "object", "maxProperties": 0}),
                         with_id=False))
    return {"oneOf": events}
