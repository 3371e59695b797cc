"""A claim whose answer never reached a living client is put back in the queue by the server (real server)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentlightning.store import InMemoryLightningStore
from agentlightning.store.client_server import LightningStoreServer
from agentlightning.store.http.server.claims import ClaimLedger

from .conftest import call, start_server, stop_server


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def served() -> Iterator[tuple[LightningStoreServer, FakeClock]]:
    server = start_server(InMemoryLightningStore())
    clock = FakeClock()
    ledger: ClaimLedger = server.app.state.claims
    ledger.clock = clock
    try:
        yield server, clock
    finally:
        stop_server(server)


def _claim(server: LightningStoreServer, worker_id: str) -> list[dict[str, object]]:
    answer = call(server, "POST", "/v1/agl/queues/rollouts/dequeue", {"limit": 1, "worker_id": worker_id})
    assert answer.status == 200, answer.body
    return answer.json


def test_an_unacknowledged_claim_is_requeued_after_the_ack_period(
    served: tuple[LightningStoreServer, FakeClock],
) -> None:
    server, clock = served
    rollout_id = call(server, "POST", "/v1/agl/queues/rollouts/enqueue", {"rollouts": [{"input": 1}]}).json[0][
        "rollout_id"
    ]
    lost = _claim(server, "gone")  # its client never gets (or never uses) the answer
    assert lost[0]["rollout_id"] == rollout_id
    assert _claim(server, "w2") == []
    clock.now += server.settings.claim_ack_seconds + 1
    recovered = _claim(server, "w2")
    assert [item["rollout_id"] for item in recovered] == [rollout_id]
    attempts = call(server, "GET", f"/v1/agl/rollouts/{rollout_id}/attempts").json["items"]
    assert [(a["sequence_id"], a["status"]) for a in attempts] == [(1, "unresponsive"), (2, "preparing")]
    worker = call(server, "GET", "/v1/agl/workers/gone").json
    assert worker["current_rollout_id"] is None


@pytest.mark.parametrize(
    "acknowledge",
    [
        {"status": "running"},
        {"last_heartbeat_time": 1.0},
    ],
)
def test_an_acknowledged_claim_stays_with_its_worker(
    served: tuple[LightningStoreServer, FakeClock], acknowledge: dict[str, object]
) -> None:
    server, clock = served
    call(server, "POST", "/v1/agl/queues/rollouts/enqueue", {"rollouts": [{"input": 1}]})
    claimed = _claim(server, "w1")[0]
    attempt = claimed["attempt"]
    assert isinstance(attempt, dict)
    path = f"/v1/agl/rollouts/{claimed['rollout_id']}/attempts/{attempt['attempt_id']}"
    assert call(server, "POST", path, acknowledge).status == 200
    clock.now += server.settings.claim_ack_seconds + 1
    assert _claim(server, "w2") == []
    rollout = call(server, "GET", f"/v1/agl/rollouts/{claimed['rollout_id']}").json
    assert rollout["status"] == "running" and rollout["attempt"]["worker_id"] == "w1"


def test_a_rollout_with_one_allowed_attempt_is_still_requeued_since_it_never_ran(
    served: tuple[LightningStoreServer, FakeClock],
) -> None:
    server, clock = served
    body = {"rollouts": [{"input": 1, "config": {"max_attempts": 1}}]}
    rollout_id = call(server, "POST", "/v1/agl/queues/rollouts/enqueue", body).json[0]["rollout_id"]
    _claim(server, "gone")
    clock.now += server.settings.claim_ack_seconds + 1
    assert [item["rollout_id"] for item in _claim(server, "w2")] == [rollout_id]
