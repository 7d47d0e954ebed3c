"""A2A tasks across a real restart: ``selectgraph serve --store sqlite:///…`` stopped and started.

The a2a-sdk's client talks to the command in a subprocess; a second process on the
same store finds the first one's tasks, takes the answer to a question asked before
the restart, and drops a question whose task is canceled.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from a2a.client import ClientConfig, create_client
from a2a.helpers import get_artifact_text, get_data_parts
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    Task,
    TaskState,
)

from tests.cli.test_serve import served

pytestmark = pytest.mark.slow


def _message(text: str, **ids: str) -> SendMessageRequest:
    sent = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[Part(text=text)], **ids)
    return SendMessageRequest(message=sent)


async def _send(url: str, request: SendMessageRequest) -> Task:
    config = ClientConfig(streaming=False)
    async with await create_client(url, client_config=config) as client:
        [response] = [event async for event in client.send_message(request)]
    return response.task


async def _get(url: str, task_id: str) -> Task:
    async with await create_client(url, client_config=ClientConfig(streaming=False)) as client:
        return await client.get_task(GetTaskRequest(id=task_id))


async def test_tasks_outlive_the_server_process(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'a2a.db'}"
    with served("tests.cli.graphs:approval", "--store", store) as running:
        asked = await _send(running.url, _message("ship"))
        dropped = await _send(running.url, _message("ship"))

    with served("tests.cli.graphs:approval", "--store", store) as running:
        waiting = await _get(running.url, asked.id)
        done = await _send(running.url, _message("yes", context_id=asked.context_id))
        async with await create_client(running.url) as client:
            cancelled = await client.cancel_task(CancelTaskRequest(id=dropped.id))
        fresh = await _send(running.url, _message("again", context_id=dropped.context_id))

    assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert get_data_parts(waiting.status.message.parts)[0]["prompt"] == "Ship it?"
    assert done.id == asked.id
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert get_artifact_text(done.artifacts[0]) == "answered 'yes'"
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    # The canceled question is gone: "again" is new input, asked the question afresh.
    assert fresh.id != dropped.id
    assert fresh.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
