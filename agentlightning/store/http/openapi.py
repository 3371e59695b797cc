"""The OpenAPI document of the store server, built from the operations table.

`python -m agentlightning.store.http.openapi` writes it to docs/openapi.json (`--check` fails when that file is
stale instead of writing it).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

from pydantic import BaseModel, RootModel, TypeAdapter

from agentlightning.store.http.models import ErrorResponse, HealthResponse
from agentlightning.store.http.operations import API_PREFIX, OPERATIONS, Operation

__all__ = ["DEFAULT_PATH", "build_openapi", "main", "render_openapi"]

DEFAULT_PATH = Path(__file__).resolve().parents[3] / "docs" / "openapi.json"
_REF = "#/components/schemas/{model}"
_ERRORS = {
    "400": "Invalid argument (InvalidArgumentError, InvalidArgumentTypeError)",
    "401": "Missing or wrong API key",
    "404": "Unknown rollout or attempt (RolloutNotFoundError, AttemptNotFoundError), or unknown route",
    "409": "The rollout has no attempt yet (NoAttemptsError)",
    "410": "The spans of the rollout were evicted (SpansEvictedError)",
    "413": "Request body too large",
    "422": "The request body does not match its schema, or an Idempotency-Key was reused for another request",
}


_EXTRA_ERRORS = {"update_attempt": ["409"], "query_spans": ["410"]}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _error_responses(error_schema: dict[str, Any], *codes: str) -> dict[str, Any]:
    return {code: {"description": _ERRORS[code], "content": _json(error_schema)} for code in codes}


def _resolve(schema: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
        return definitions[ref.rsplit("/", 1)[1]]
    return schema


def _without_null(schema: dict[str, Any]) -> dict[str, Any]:
    options = schema.get("anyOf")
    if isinstance(options, list):
        rest = [option for option in options if option != {"type": "null"}]
        if len(rest) == 1:
            merged = {key: value for key, value in schema.items() if key != "anyOf"}
            merged.update(rest[0])
            return merged
    return schema


def _body_required(model: Optional[type[BaseModel]]) -> bool:
    if model is None:
        return False
    if issubclass(model, RootModel):
        return True
    return any(info.is_required() for info in model.model_fields.values())


def _path_parameters(op: Operation) -> list[dict[str, Any]]:
    return [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string", "minLength": 1}}
        for name in op.path_params
    ]


def _query_parameters(body_schema: dict[str, Any], path_params: tuple[str, ...]) -> list[dict[str, Any]]:
    required = set(body_schema.get("required", ()))
    parameters = []
    for name, schema in body_schema.get("properties", {}).items():
        if name in path_params:
            continue
        parameters.append(
            {"name": name, "in": "query", "required": name in required, "schema": _without_null(copy.deepcopy(schema))}
        )
    return parameters


def _operation_object(
    op: Operation,
    summary: str,
    op_id: str,
    response_schema: dict[str, Any],
    error_schema: dict[str, Any],
    *,
    request_schema: Optional[dict[str, Any]] = None,
    body_required: bool = False,
    parameters: Optional[list[dict[str, Any]]] = None,
) -> dict[str, Any]:
    codes = ["400", "401", "404", "413", "422", *_EXTRA_ERRORS.get(op.name, [])]
    result: dict[str, Any] = {
        "operationId": op_id,
        "summary": summary,
        "tags": ["store"],
        "responses": {
            str(op.status_code): {"description": "Success", "content": _json(response_schema)},
            **_error_responses(error_schema, *sorted(set(codes))),
        },
    }
    if parameters:
        result["parameters"] = parameters
    if request_schema is not None:
        result["requestBody"] = {"required": body_required, "content": _json(request_schema)}
    if not op.idempotent:
        result["parameters"] = [
            *result.get("parameters", []),
            {
                "name": "Idempotency-Key",
                "in": "header",
                "required": False,
                "description": "Makes a retried write apply once: the server replays the first response",
                "schema": {"type": "string", "maxLength": 255},
            },
        ]
    return result


@lru_cache(maxsize=1)
def _document() -> str:
    inputs: list[tuple[Any, Any, TypeAdapter[Any]]] = [
        ("error", "serialization", TypeAdapter(ErrorResponse)),
        ("health", "serialization", TypeAdapter(HealthResponse)),
    ]
    for op in OPERATIONS:
        inputs.append(((op.name, "response"), "serialization", op.response_adapter))
        inputs.append(((op.name, "ops"), "validation", TypeAdapter(op.ops_body)))
        if op.body is not None:
            inputs.append(((op.name, "body"), "validation", TypeAdapter(op.body)))
    schemas, definitions_block = TypeAdapter.json_schemas(inputs, ref_template=_REF)
    definitions: dict[str, Any] = definitions_block.get("$defs", {})
    error_schema = schemas[("error", "serialization")]
    paths: dict[str, dict[str, Any]] = {}
    for op in OPERATIONS:
        response_schema = schemas[((op.name, "response"), "serialization")]
        body_schema = schemas[((op.name, "body"), "validation")] if op.body is not None else None
        paths.setdefault(op.route, {})[op.method.lower()] = _operation_object(
            op,
            op.summary,
            op.name,
            response_schema,
            error_schema,
            request_schema=body_schema,
            body_required=_body_required(op.body),
            parameters=_path_parameters(op),
        )
        if op.query_route is not None and body_schema is not None:
            resolved = _resolve(body_schema, definitions)
            paths.setdefault(API_PREFIX + op.query_route, {})["get"] = _operation_object(
                op,
                op.summary + " (filters as query parameters)",
                f"{op.name}_get",
                response_schema,
                error_schema,
                parameters=_path_parameters(op) + _query_parameters(resolved, op.path_params),
            )
        paths.setdefault(op.ops_route, {})["post"] = _operation_object(
            op,
            f"{op.name} with every argument in the body",
            f"{op.name}_call",
            response_schema,
            error_schema,
            request_schema=schemas[((op.name, "ops"), "validation")],
            body_required=_body_required(op.ops_body),
        )
    paths[f"{API_PREFIX}/health"] = {
        "get": {
            "operationId": "health",
            "summary": "Liveness probe (no API key needed)",
            "tags": ["service"],
            "security": [],
            "responses": {
                "200": {"description": "The server is up", "content": _json(schemas["health", "serialization"])}
            },
        }
    }
    paths[f"{API_PREFIX}/metrics"] = {
        "get": {
            "operationId": "metrics",
            "summary": "Prometheus metrics",
            "tags": ["service"],
            "responses": {
                "200": {
                    "description": "Prometheus text format",
                    "content": {"text/plain": {"schema": {"type": "string"}}},
                },
                "501": {"description": "prometheus_client is not installed", "content": _json(error_schema)},
                **_error_responses(error_schema, "401"),
            },
        }
    }
    paths["/v1/traces"] = {
        "post": {
            "operationId": "otlp_traces",
            "summary": "OTLP/HTTP trace export (protobuf or JSON, optionally gzip)",
            "tags": ["otlp"],
            "requestBody": {
                "required": True,
                "content": {
                    "application/x-protobuf": {"schema": {"type": "string", "format": "binary"}},
                    "application/json": {"schema": {"type": "object"}},
                },
            },
            "responses": {
                "200": {
                    "description": "ExportTraceServiceResponse (partial_success lists rejected spans)",
                    "content": {
                        "application/x-protobuf": {"schema": {"type": "string", "format": "binary"}},
                        "application/json": {"schema": {"type": "object"}},
                    },
                },
                **_error_responses(error_schema, "400", "401", "413"),
                "415": {"description": "Unsupported Content-Type or Content-Encoding", "content": _json(error_schema)},
            },
        }
    }
    document = {
        "openapi": "3.1.0",
        "info": {
            "title": "LightningStore Server",
            "version": "0.3.0",
            "description": "The LightningStore over HTTP. See docs/http.md.",
        },
        "security": [{"bearerAuth": []}],
        "paths": dict(sorted(paths.items())),
        "components": {
            "schemas": dict(sorted(definitions.items())),
            "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer"}},
        },
    }
    return json.dumps(document, indent=2, sort_keys=False) + "\n"


def render_openapi() -> str:
    """The OpenAPI document as JSON text (deterministic)."""
    return _document()


def build_openapi() -> dict[str, Any]:
    """The OpenAPI document as a dict (a fresh copy)."""
    return json.loads(_document())


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", nargs="?", default=str(DEFAULT_PATH), help="where to write the document")
    parser.add_argument("--check", action="store_true", help="fail if the file differs instead of writing it")
    args = parser.parse_args(argv)
    path = Path(args.path)
    text = render_openapi()
    if args.check:
        if not path.exists() or path.read_text() != text:
            print(f"{path} is stale: run python -m agentlightning.store.http.openapi", file=sys.stderr)
            return 1
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
