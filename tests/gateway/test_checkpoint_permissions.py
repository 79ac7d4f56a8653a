"""Checkpoint permissions, through the official ``openai`` package (issue 32).

``owner`` shares a checkpoint model of its finished job with ``friend`` (OpenAI's
``project_ids`` are alallo account ids); ``stranger`` is shared nothing. The friend may train
from the checkpoint (and chat with it: test_checkpoint_models.py, which needs real weights),
nothing else: no retrieve, delete or download, no permissions, none of the owner's jobs;
revoking takes it all away. To the stranger, and to the friend for all but those two, the
checkpoint answers in the words of an id nobody has. Every answer is read with the SDK's own
types, warnings as errors. The store is the subject: this runs on both backends.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import openai
import pytest
from openai.types.fine_tuning.checkpoints import (
    PermissionCreateResponse,
    PermissionDeleteResponse,
    PermissionListResponse,
    PermissionRetrieveResponse,
)
from support import EXAMPLES, LiveServer, wait_final
from test_checkpoint_models import sdk_for, simulated_job, strict
from test_tenants import new_account

TINY = "alallo/tiny-gpt2"


@dataclass
class World:
    server: LiveServer
    owner: openai.OpenAI
    friend: openai.OpenAI
    stranger: openai.OpenAI
    owner_id: str
    friend_id: str
    stranger_id: str
    job: dict[str, Any]
    checkpoint: str
    """The owner's checkpoint model at step 10."""
    friend_key: str
    stranger_key: str


@pytest.fixture(scope="module")
def world(live_server: LiveServer) -> Iterator[World]:
    owner_id, owner_key = new_account(live_server, "ckpt-owner")
    friend_id, friend_key = new_account(live_server, "ckpt-friend")
    stranger_id, stranger_key = new_account(live_server, "ckpt-stranger")
    with (sdk_for(live_server, owner_key) as owner, sdk_for(live_server, friend_key) as friend,
          sdk_for(live_server, stranger_key) as stranger):
        job = simulated_job(live_server, owner, TINY, 20, key=owner_key)
        assert job["status"] == "succeeded", (job["message"], job["error"])
        yield World(live_server, owner, friend, stranger, owner_id, friend_id, stranger_id,
                    job, f"{job['fine_tuned_model']}:ckpt-step-10", friend_key, stranger_key)


def unknown_like(checkpoint: str) -> str:
    """A checkpoint model id of the same shape that nobody has."""
    fields = checkpoint.split(":")
    fields[4] = "0" * len(fields[4])
    return ":".join(fields)


def test_share_list_retrieve_and_revoke_as_openai(world: World) -> None:
    permissions = world.owner.fine_tuning.checkpoints.permissions
    created = permissions.with_raw_response.create(
        world.checkpoint, project_ids=[world.friend_id]).http_response.json()
    assert created["object"] == "list" and len(created["data"]) == 1
    permission = strict(PermissionCreateResponse, created["data"][0])
    assert permission.project_id == world.friend_id and permission.id.startswith("cp_")
    assert permission.object == "checkpoint.permission" and permission.created_at > 0
    again = permissions.create(world.checkpoint, project_ids=[world.friend_id])
    assert [p.id for p in again.data] == [permission.id], "sharing again keeps the permission"

    listed = permissions.with_raw_response.list(world.checkpoint).http_response.json()
    assert [strict(PermissionListResponse, p).id for p in listed["data"]] == [permission.id]
    assert (listed["has_more"], listed["first_id"], listed["last_id"]) == (
        False, permission.id, permission.id)
    with warnings.catch_warnings():  # the SDK marks retrieve deprecated: list replaces it
        warnings.simplefilter("ignore", DeprecationWarning)
        raw = permissions.with_raw_response.retrieve(world.checkpoint).http_response.json()
    assert [p.id for p in strict(PermissionRetrieveResponse, raw).data] == [permission.id]
    assert permissions.list(world.checkpoint, project_id=world.stranger_id).data == []

    deleted = permissions.with_raw_response.delete(
        permission.id, fine_tuned_model_checkpoint=world.checkpoint).http_response.json()
    assert strict(PermissionDeleteResponse, deleted).deleted is True
    assert deleted["id"] == permission.id
    assert permissions.list(world.checkpoint).data == []
    with pytest.raises(openai.NotFoundError) as gone:
        permissions.delete(permission.id, fine_tuned_model_checkpoint=world.checkpoint)
    assert gone.value.body["param"] == "permission_id"  # type: ignore[index]


def test_permissions_page_in_either_order(world: World) -> None:
    permissions = world.owner.fine_tuning.checkpoints.permissions
    checkpoint = f"{world.job['fine_tuned_model']}:ckpt-step-20"
    first = permissions.create(checkpoint, project_ids=[world.friend_id]).data[0]
    second = permissions.create(checkpoint, project_ids=[world.stranger_id]).data[0]
    try:
        page = permissions.list(checkpoint, limit=1, order="ascending")
        assert [p.id for p in page.data] == [first.id] and page.has_more
        assert [p.id for p in page.get_next_page().data] == [second.id]
        every = [p.project_id for p in permissions.list(checkpoint, limit=1)]
        assert every == [world.stranger_id, world.friend_id], "newest first, page by page"
        with pytest.raises(openai.BadRequestError) as bad:
            permissions.list(checkpoint, after="cp_nothing")
        assert bad.value.body["param"] == "after"  # type: ignore[index]
    finally:
        for permission in (first, second):
            permissions.delete(permission.id, fine_tuned_model_checkpoint=checkpoint)


@pytest.mark.parametrize(("project_ids", "words"), [
    (["acct-" + "0" * 16], "which is no account here"),
    ([], ""),  # pydantic's words: the param names the field
    ("acct-x", ""),
])
def test_a_share_with_no_such_account_is_refused_naming_the_field(
        world: World, project_ids: Any, words: str) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        world.owner.fine_tuning.checkpoints.permissions.create(world.checkpoint,
                                                               project_ids=project_ids)
    assert refused.value.body["param"].startswith("project_ids")  # type: ignore[index]
    assert words in refused.value.body["message"]  # type: ignore[index]


def test_a_checkpoint_is_not_shared_with_its_own_account(world: World) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        world.owner.fine_tuning.checkpoints.permissions.create(
            world.checkpoint, project_ids=[world.owner_id])
    assert "own account" in refused.value.body["message"]  # type: ignore[index]


def train_from(world: World, sdk: openai.OpenAI, model: str) -> Any:
    """Create a job of ``sdk``'s account that starts from ``model`` (a 2-step simulated one)."""
    with (EXAMPLES / "sample.jsonl").open("rb") as f:
        file_id = sdk.files.create(file=f, purpose="fine-tune").id
    return sdk.fine_tuning.jobs.create(model=model, training_file=file_id, extra_body={
        "hyperparameters": {"max_steps": 2}, "trainer": {"type": "simulated",
                                                         "step_delay_s": 0}})


def refused_as_unknown(call: Any, theirs: str, nobodys: str) -> None:
    """``call(theirs)`` fails exactly as ``call(nobodys)`` does (the id aside)."""
    answers = []
    for name in (theirs, nobodys):
        with pytest.raises(openai.APIStatusError) as refused:
            call(name)
        body = dict(refused.value.body)  # type: ignore[arg-type]
        body["message"] = str(body["message"]).replace(name, "<id>")
        answers.append((refused.value.status_code, body))
    assert answers[0] == answers[1], answers
    assert answers[0][0] in (404, 400), answers


def test_a_shared_account_may_train_from_it_and_nothing_else(world: World) -> None:
    checkpoint, nobodys = world.checkpoint, unknown_like(world.checkpoint)
    permissions = world.owner.fine_tuning.checkpoints.permissions
    permission = permissions.create(checkpoint, project_ids=[world.friend_id]).data[0]
    try:
        job = train_from(world, world.friend, checkpoint)
        assert job.model == checkpoint and job.status == "queued"
        final = wait_final(world.server, job.id, world.friend_key)
        assert final["status"] == "succeeded", (final["message"], final["error"])
        assert final["fine_tuned_model"].split(":")[2] == world.friend_id, "the friend's model"

        # Nothing else: each answers as an id nobody has.
        friend = world.friend
        for call in (friend.models.retrieve, friend.models.delete,
                     lambda m: friend.fine_tuning.checkpoints.permissions.list(m),
                     lambda m: friend.fine_tuning.checkpoints.permissions.create(
                         m, project_ids=[world.friend_id]),
                     lambda m: friend.fine_tuning.checkpoints.permissions.delete(
                         permission.id, fine_tuned_model_checkpoint=m)):
            refused_as_unknown(call, checkpoint, nobodys)
        with pytest.raises(openai.NotFoundError):
            friend.fine_tuning.jobs.retrieve(world.job["id"])
        with pytest.raises(openai.NotFoundError):
            friend.fine_tuning.jobs.checkpoints.list(world.job["id"])
        assert checkpoint not in [m.id for m in friend.models.list()]
        assert world.owner.models.retrieve(checkpoint).id == checkpoint, "still the owner's"
    finally:
        permissions.delete(permission.id, fine_tuned_model_checkpoint=checkpoint)
    # Revoked: training from it is refused as from an id nobody has.
    refused_as_unknown(lambda m: train_from(world, world.friend, m), checkpoint, nobodys)


def test_an_unshared_checkpoint_is_invisible(world: World) -> None:
    checkpoint, nobodys = world.checkpoint, unknown_like(world.checkpoint)
    world.owner.fine_tuning.checkpoints.permissions.create(checkpoint,
                                                           project_ids=[world.friend_id])
    stranger = world.stranger
    for call in (stranger.models.retrieve, stranger.models.delete,
                 lambda m: train_from(world, stranger, m),
                 lambda m: stranger.completions.create(model=m, prompt="Hi", max_tokens=2),
                 lambda m: stranger.fine_tuning.checkpoints.permissions.list(m)):
        refused_as_unknown(call, checkpoint, nobodys)
    assert world.owner.models.retrieve(checkpoint).id == checkpoint
