"""How an answer becomes a call's result or one of :mod:`alallo._errors`' errors.

An error answer becomes the :class:`~alallo.ApiError` subclass it names
(:func:`alallo._errors.api_error`); a failed exchange (no server, no key, an
answer unlike API.md) a :class:`~alallo.ClientError`, chained to HTTPX's
error where there is one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from alallo._errors import ClientError, api_error

__all__ = ["json_body", "missing_key", "raise_for_status", "transport_error"]


def transport_error(base_url: str, exc: httpx.TransportError) -> ClientError:
    """What a transport error means to the caller (raise it ``from exc``)."""
    if isinstance(exc, httpx.ConnectError):
        return ClientError(
            f"cannot reach alallo at {base_url}: is the server running? "
            "start it with `alallo serve`"
        )
    if isinstance(exc, httpx.TimeoutException):
        return ClientError(f"alallo at {base_url} did not answer in time")
    return ClientError(f"talking to alallo at {base_url} failed: {exc}")


def missing_key(data_dir: Path) -> ClientError:
    """No API key anywhere: say where one comes from."""
    return ClientError(
        "no API key: pass --api-key, set ALALLO_API_KEY, or start the server "
        f"with `alallo serve`, which writes one to {data_dir / 'api-key'}"
    )


def raise_for_status(response: httpx.Response) -> None:
    """Raise the error an error answer names (its body read); nothing for a success."""
    if response.is_success:
        return
    try:
        error = response.json()["error"]
        code, message, param = error["code"], error["message"], error.get("param")
    except (ValueError, KeyError, TypeError):
        # Not alallo's error body (a proxy, or a path this server lacks): say where.
        text = response.text.strip()[:200] or response.reason_phrase
        request = response.request
        code, message = (
            f"http_{response.status_code}",
            f"{text} ({request.method} {request.url.path})",
        )
        param = None
    raise api_error(response.status_code, str(code), str(message), param)


def json_body(response: httpx.Response, method: str, path: str) -> dict[str, Any]:
    """The JSON object a successful answer carries (``{}`` for an empty body)."""
    raise_for_status(response)
    if not response.content:
        return {}
    try:
        body = response.json()
    except ValueError as exc:
        raise ClientError(f"{method} {path} answered something that is not JSON") from exc
    if not isinstance(body, dict):
        raise ClientError(f"{method} {path} answered JSON that is not an object")
    return body
