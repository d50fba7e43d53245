"""OpenAPI-driven fuzzing with schemathesis: no input, valid or not, makes the service answer 5xx.

Runs every operation of the app's own schema, with positive (schema-valid)
and negative (schema-violating) data, authenticated as an admin with every
role (so requests get past auth into the routes), over ASGI in-process.
Bounded examples keep it well under a minute. Every response, whatever its
status, must be JSON or SSE and every error must use the one envelope.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from tests.support.api_harness import Harness, bearer
from tests.support.fixtures import VACATION, harness_fixture

AUTH = bearer("tok-root-admin")
EXAMPLES = {GenerationMode.POSITIVE: 25, GenerationMode.NEGATIVE: 15}


h = harness_fixture(VACATION, ("pay", "Salaries are paid on the last working day.", "hr"))


def _check(response: Any) -> None:
    assert response.status_code < 500, (response.status_code, response.text[:300])
    ctype = response.headers.get("content-type", [""])
    ctype = ctype[0] if isinstance(ctype, list) else ctype
    if ctype.startswith("text/event-stream"):
        return
    body = json.loads(response.text)
    if response.status_code >= 400:
        assert set(body) >= {"error"}, body
        # param and code: the OpenAI facade's refusals, in OpenAI's error shape.
        assert (
            {"type", "message", "request_id"}
            <= set(body["error"])
            <= {"type", "message", "request_id", "param", "code"}
        )


@pytest.mark.parametrize("mode", list(EXAMPLES), ids=lambda m: m.value)
def test_schemathesis_finds_no_server_error(h: Harness, mode: GenerationMode) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", h.app)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {f"{op.method.upper()} {op.path}" for op in operations} >= {
        "POST /v1/query",
        "POST /v1/search",
        "POST /v1/chat/completions",
        "GET /v1/models",
        "GET /v1/documents",
        "DELETE /v1/documents/{doc_id}",
        "GET /v1/admin/quarantine",
        "GET /healthz",
        "GET /readyz",
    }
    calls = 0
    for op in operations:

        @settings(
            max_examples=EXAMPLES[mode],
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=op.as_strategy(generation_mode=mode))
        def run(case: Any) -> None:
            nonlocal calls
            calls += 1
            if case.operation.path == "/v1/documents/{doc_id}":
                # Never delete the fixtures: fuzz ids go to a throwaway prefix.
                case.path_parameters = {"doc_id": "fuzz-" + str(case.path_parameters.get("doc_id", ""))[:100]}
            _check(case.call(headers=AUTH))

        try:
            run()
        except Unsatisfiable:
            # Negative mode cannot violate an operation that takes no input (GET /healthz).
            assert mode is GenerationMode.NEGATIVE
    assert calls >= len(operations)
