"""The wire is generated from one table: every contract method is covered on both sides, and docs are current."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest
from pydantic import Field, ValidationError

from agentlightning.store import InMemoryLightningStore, LightningStore
from agentlightning.store.client_server import LightningStoreClient, LightningStoreServer
from agentlightning.store.http.models import request_body
from agentlightning.store.http.operations import (
    API_PREFIX,
    CLIENT_DERIVED_METHODS,
    CLIENT_LOCAL_MEMBERS,
    OPERATIONS,
    OPERATIONS_BY_NAME,
)
from agentlightning.store.http.server.app import create_app

ROOT = Path(__file__).resolve().parents[3]


def _public_members(cls: type) -> set[str]:
    return {name for name in vars(cls) if not name.startswith("_")}


def test_every_public_store_member_is_an_operation_or_handled_by_the_client() -> None:
    covered = set(OPERATIONS_BY_NAME) | set(CLIENT_DERIVED_METHODS) | CLIENT_LOCAL_MEMBERS
    assert _public_members(LightningStore) == covered


def test_operations_run_store_methods() -> None:
    for op in OPERATIONS:
        assert inspect.iscoroutinefunction(getattr(LightningStore, op.name)), op.name
    for method, op_name in CLIENT_DERIVED_METHODS.items():
        assert op_name in OPERATIONS_BY_NAME, method


def test_request_fields_are_parameters_of_the_store_method() -> None:
    for op in OPERATIONS:
        parameters = set(inspect.signature(getattr(LightningStore, op.name)).parameters) - {"self"}
        fields = set(op.ops_body.model_fields)
        assert fields <= parameters, (op.name, fields - parameters)
        assert set(op.path_params) <= parameters, op.name


def _implements(cls: type, name: str) -> bool:
    """`name` comes from a class below LightningStore (the generated DelegatingStore or `cls` itself)."""
    owner = next(klass for klass in cls.__mro__ if name in vars(klass))
    return owner is not LightningStore


def test_client_implements_every_store_member() -> None:
    for name in _public_members(LightningStore):
        assert _implements(LightningStoreClient, name), f"LightningStoreClient does not implement {name}"


def test_server_object_implements_every_store_member() -> None:
    for name in _public_members(LightningStore):
        assert _implements(LightningStoreServer, name), f"LightningStoreServer does not implement {name}"


def test_the_app_has_a_rest_route_and_an_ops_route_per_operation() -> None:
    app = create_app(InMemoryLightningStore())
    routes = {(method, path) for method, path, _ in app.state.operation_routes}
    for op in OPERATIONS:
        assert (op.method, op.route) in routes, op.name
        assert ("POST", op.ops_route) in routes, op.name
        if op.query_route:
            assert ("GET", API_PREFIX + op.query_route) in routes, op.name


def test_literal_segments_win_over_ids(server: LightningStoreServer) -> None:
    from .conftest import call

    assert call(server, "GET", "/v1/agl/resources/latest").json is None
    assert call(server, "POST", "/v1/agl/rollouts/search", {}).json["total"] == 0
    assert call(server, "GET", "/v1/agl/rollouts/").status == 404


def test_docs_openapi_json_is_up_to_date() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "agentlightning.store.http.openapi", "--check", str(ROOT / "docs" / "openapi.json")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr + " (regenerate with: python -m agentlightning.store.http.openapi)"


def test_openapi_documents_every_operation() -> None:
    from agentlightning.store.http.openapi import build_openapi

    document = build_openapi()
    for op in OPERATIONS:
        assert op.method.lower() in document["paths"][op.route], op.name
        assert "post" in document["paths"][op.ops_route], op.name
    assert document["paths"][f"{API_PREFIX}/health"]["get"]["security"] == []


def test_the_server_serves_the_same_openapi_document(server: LightningStoreServer) -> None:
    from agentlightning.store.http.openapi import build_openapi

    from .conftest import call

    answer = call(server, "GET", "/v1/agl/openapi.json")
    assert answer.status == 200 and answer.json == build_openapi()


def test_a_derived_body_has_a_field_per_store_method_parameter_but_the_path_ids() -> None:
    body = request_body("query_attempts", "QueryAttemptsBody", "a test body", path=["rollout_id"])
    parameters = [name for name in inspect.signature(LightningStore.query_attempts).parameters if name != "self"]
    assert list(body.model_fields) == [name for name in parameters if name != "rollout_id"]
    assert body().model_dump() == {"sort_by": "sequence_id", "sort_order": "asc", "limit": -1, "offset": 0}


def test_a_derived_body_may_leave_an_unset_parameter_out_but_not_send_it_as_null() -> None:
    body = request_body("update_worker", "UpdateWorkerBody", "a test body", path=["worker_id"])
    assert body().model_fields_set == set()
    with pytest.raises(ValidationError):
        body.model_validate({"heartbeat_stats": None})


def test_a_derived_body_takes_null_for_an_unset_parameter_whose_type_allows_it() -> None:
    body = request_body("update_rollout", "UpdateRolloutBody", "a test body", path=["rollout_id"])
    assert body.model_validate({"metadata": None}).model_fields_set == {"metadata"}


def test_a_derived_body_keeps_integers_within_what_the_databases_store_and_sequences_as_lists() -> None:
    body = request_body("query_workers", "QueryWorkersBody", "a test body")
    with pytest.raises(ValidationError):
        body.model_validate({"limit": 2**63})
    with pytest.raises(ValidationError):
        body.model_validate({"status_in": "idle"})  # a string is a Sequence, never a list of statuses


def test_a_derived_body_rejects_unknown_fields() -> None:
    body = request_body("dequeue_many_rollouts", "DequeueBody", "a test body")
    with pytest.raises(ValidationError):
        body.model_validate({"limit": 1, "worker": "w"})


def test_a_derived_body_takes_the_wire_form_given_for_a_parameter() -> None:
    body = request_body(
        "query_spans", "QuerySpansBody", "a test body", fields={"attempt_id": (Optional[str], Field(default=None))}
    )
    assert body.model_fields["attempt_id"].annotation == Optional[str]
