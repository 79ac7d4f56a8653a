"""Follow a job over Server-Sent Events the way a browser's ``EventSource`` does.

    python examples/follow_sse.py JOB_ID          # ALALLO_URL, ALALLO_API_KEY as for the CLI

It speaks the protocol by hand (with ``httpx-sse`` for the framing) to show
what ``EventSource`` and ``alallo.Client.watch`` do for you: remember the
last ``id``, wait ``retry`` milliseconds after a drop and reconnect with
``Last-Event-ID``; stop at ``event: done``, or when a reconnect answers 204
(the job had finished and everything was sent).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import httpx
from httpx_sse import connect_sse


def follow(url: str, key: str, job_id: str) -> None:
    last_id: str | None = None
    retry_s = 2.0
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"},
                      timeout=httpx.Timeout(10, read=60)) as client:
        while True:
            headers = {"Last-Event-ID": last_id} if last_id else {}
            try:
                with connect_sse(client, "GET", f"/v1/fine_tuning/jobs/{job_id}/stream",
                                 headers=headers) as source:
                    if source.response.status_code == 204:
                        print("done (nothing more to send)")
                        return
                    source.response.raise_for_status()
                    for sse in source.iter_sse():
                        if sse.retry is not None:
                            retry_s = sse.retry / 1000
                        if sse.id:
                            last_id = sse.id
                        if not sse.data:  # a keep-alive comment: nothing to show
                            continue
                        if sse.event == "done":
                            print(f"done: {json.loads(sse.data)['status']}")
                            return
                        show(sse.event, sse.id, json.loads(sse.data))
            except httpx.TransportError as exc:  # dropped: resume after the last id
                print(f"(connection lost: {exc}; resuming after {last_id})", file=sys.stderr)
            time.sleep(retry_s)


def show(kind: str, seq: str, data: dict[str, object]) -> None:
    if kind == "job":
        print(f"[{seq}] job {data['status']} {data['progress']}")
    elif kind == "event":
        print(f"[{seq}] event {data['alallo_type']}: {data['message']}")
    elif kind == "log":
        print(f"[{seq}] log {data['text']}")


if __name__ == "__main__":
    follow(os.environ.get("ALALLO_URL", "http://127.0.0.1:8000"),
           os.environ.get("ALALLO_API_KEY") or Path(".alallo/api-key").read_text().strip(),
           sys.argv[1])
