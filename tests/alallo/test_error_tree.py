"""``alallo/_errors.py``: one tree, each refusal with its HTTP status, the same class both sides."""

from __future__ import annotations

import pytest

import alallo
import alallo.client
from alallo._errors import (
    AlalloError,
    ApiError,
    ClientError,
    Conflict,
    Forbidden,
    InvalidFile,
    InvalidRequest,
    InvalidTransition,
    LeaseLost,
    NotFound,
    SettingError,
    StoreUnavailable,
    Unauthorized,
    Unavailable,
    api_error,
    shown,
)

pytestmark = pytest.mark.unit

STATUSES: dict[type[ApiError], tuple[int, str]] = {
    InvalidRequest: (400, "invalid_request"),
    InvalidFile: (400, "invalid_file"),
    Unauthorized: (401, "unauthorized"),
    Forbidden: (403, "forbidden"),
    NotFound: (404, "not_found"),
    Conflict: (409, "conflict"),
    InvalidTransition: (409, "invalid_transition"),
    Unavailable: (503, "unavailable"),
    StoreUnavailable: (503, "store_unavailable"),
}
"""Each refusal's status and code: API.md's error table, which must not change."""


@pytest.mark.parametrize("cls", list(STATUSES), ids=lambda cls: cls.__name__)
def test_every_refusal_carries_its_status_and_code(cls: type[ApiError]) -> None:
    assert (cls.status_code, cls.code) == STATUSES[cls]
    # The named constructor, which mypy does not know type[ApiError] to have:
    err = cls("it went wrong", param="a.b")  # type: ignore[arg-type, call-arg]
    assert isinstance(err, ApiError) and isinstance(err, AlalloError)
    assert (err.status_code, err.code, err.message, err.param) == (
        *STATUSES[cls], "it went wrong", "a.b")
    assert str(err) == f"{cls.status_code} {cls.code}: it went wrong (param: a.b)"
    assert repr(err) == (f"{cls.__name__}(status_code={cls.status_code}, code={cls.code!r}, "
                         "message='it went wrong', param='a.b')")


def test_the_tree() -> None:
    assert issubclass(InvalidFile, InvalidRequest)
    assert issubclass(InvalidTransition, Conflict)
    assert issubclass(StoreUnavailable, Unavailable)
    for cls in (ApiError, ClientError, SettingError, LeaseLost):
        assert issubclass(cls, AlalloError)
    for cls in (ClientError, SettingError, LeaseLost):  # none is a refusal of the server's
        assert not issubclass(cls, ApiError) and not hasattr(cls, "status_code")


def test_api_error_keeps_its_constructor_str_and_repr() -> None:
    err = ApiError(402, "insufficient_balance", "the balance is $0.10")
    assert (err.status_code, err.code, err.message, err.param) == (
        402, "insufficient_balance", "the balance is $0.10", None)
    assert str(err) == "402 insufficient_balance: the balance is $0.10"
    assert repr(err) == ("ApiError(status_code=402, code='insufficient_balance', "
                         "message='the balance is $0.10', param=None)")


def test_the_clients_names_are_the_trees() -> None:
    assert alallo.client.AlalloClientError is AlalloError
    assert alallo.client.ApiError is alallo.ApiError is ApiError
    assert alallo.client.ClientError is alallo.ClientError is ClientError
    assert alallo.NotFound is NotFound and alallo.Unavailable is Unavailable


@pytest.mark.parametrize(("status", "code", "expected"), [
    (404, "not_found", NotFound),
    (409, "invalid_transition", InvalidTransition),
    (400, "invalid_file", InvalidFile),
    (503, "store_unavailable", StoreUnavailable),
    (400, "invalid_json", InvalidRequest),  # the gateway's BadJSON
    (413, "request_too_large", InvalidRequest),  # the gateway's RequestTooLarge
    (404, "http_404", NotFound),  # not alallo's body: the status names the class
    (503, "http_503", Unavailable),
    (401, "unauthorized", Unauthorized),
    (403, "forbidden", Forbidden),
    (402, "insufficient_balance", ApiError),  # a status no class names
    (405, "method_not_allowed", ApiError),
    (500, "http_500", ApiError),
])
def test_an_answer_becomes_the_class_it_names(status: int, code: str,
                                              expected: type[ApiError]) -> None:
    err = api_error(status, code, "what the server said", "p")
    assert type(err) is expected
    assert (err.status_code, err.code, err.message, err.param) == (
        status, code, "what the server said", "p")


def test_a_value_is_shown_quoted_and_clipped_in_a_message() -> None:
    assert shown("ft-1") == "'ft-1'"
    assert shown("x" * 256) == repr("x" * 256)
    assert shown("x" * 10_000) == repr("x" * 256) + "…"
