"""Checkers for the trace-standard exports: an ATIF trajectory against Harbor's schema and the
rules of its models' validators, an OTLP JSON trace against opentelemetry-proto's
``ExportTraceServiceRequest`` and the GenAI conventions' message schemas.

Each returns a list of problems (empty: valid), so a test can show them all at once.
"""

from __future__ import annotations

import base64
import copy
import datetime as dt
import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

FIXTURES = Path(__file__).parent / "fixtures"
_AGENT_ONLY = ("model_name", "reasoning_effort", "reasoning_content", "tool_calls", "metrics")


@cache
def _atif_validator() -> jsonschema.protocols.Validator:
    schema = json.loads((FIXTURES / "atif" / "atif.schema.json").read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def atif_errors(doc: Any) -> list[str]:
    """Problems of an ATIF trajectory: its schema, then each rule Harbor 0.25.0's pydantic
    models check in validators (harbor/models/trajectories/*.py)."""
    errors = [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in _atif_validator().iter_errors(doc)
    ]
    if errors or not isinstance(doc, dict):
        return errors
    _trajectory_rules(doc, "trajectory", errors)
    subs = doc.get("subagent_trajectories") or []
    ids = [s.get("trajectory_id") for s in subs]
    if any(i is None for i in ids):
        errors.append("subagent_trajectories: an embedded trajectory has no trajectory_id")
    if len(set(ids)) != len(ids):
        errors.append("subagent_trajectories: trajectory_ids are not unique")
    for i, sub in enumerate(subs):
        _trajectory_rules(sub, f"subagent_trajectories[{i}]", errors)
    return errors


def _trajectory_rules(t: dict[str, Any], where: str, errors: list[str]) -> None:
    for i, step in enumerate(t["steps"]):
        at = f"{where}.steps[{i}]"
        if step["step_id"] != i + 1:
            errors.append(f"{at}.step_id: expected {i + 1}, got {step['step_id']}")
        if step["source"] != "agent":
            errors += [f"{at}.{f}: only on agent steps" for f in _AGENT_ONLY if f in step]
        if step.get("llm_call_count") == 0 and step["source"] == "agent":
            llm = ("metrics", "reasoning_content")
            errors += [f"{at}.{f}: not with llm_call_count 0" for f in llm if f in step]
        if step.get("timestamp") is not None:
            try:
                dt.datetime.fromisoformat(step["timestamp"].replace("Z", "+00:00"))
            except ValueError as exc:
                errors.append(f"{at}.timestamp: {exc}")
        calls = {c["tool_call_id"] for c in step.get("tool_calls") or ()}
        parts = step["message"] if isinstance(step["message"], list) else []
        for result in (step.get("observation") or {}).get("results", ()):
            sid = result.get("source_call_id")
            if sid is not None and sid not in calls:
                errors.append(f"{at}.observation: source_call_id {sid!r} is no tool call of it")
            for ref in result.get("subagent_trajectory_ref") or ():
                if ref.get("trajectory_id") is None and ref.get("trajectory_path") is None:
                    errors.append(f"{at}.observation: a sub-agent reference resolves nothing")
            if isinstance(result.get("content"), list):
                parts = parts + result["content"]
        for p in parts:
            if p["type"] == "text" and (p.get("text") is None or p.get("source") is not None):
                errors.append(f"{at}: a text part needs text and no source")
            if p["type"] in ("image", "audio") and (p.get("source") is None or "text" in p):
                errors.append(f"{at}: a {p['type']} part needs a source and no text")


# -- OpenTelemetry --------------------------------------------------------------------------


@cache
def _otel_schema(name: str) -> dict[str, Any]:
    schema = json.loads((FIXTURES / "otel" / f"gen-ai-{name}.json").read_text())
    jsonschema.validators.validator_for(schema).check_schema(schema)
    return schema


@cache
def _item_validators(name: str) -> tuple[Any, dict[str, Any]]:
    """A validator of one item of a messages schema, and one per part type it defines."""
    schema = _otel_schema(name)
    defs = schema["$defs"]
    item = jsonschema.Draft202012Validator({"$defs": defs, **schema["items"]})
    parts = {
        d["properties"]["type"]["const"]: jsonschema.Draft202012Validator(
            {"$defs": defs, "$ref": f"#/$defs/{k}"}
        )
        for k, d in defs.items()
        if "const" in d.get("properties", {}).get("type", {})
    }
    return item, parts


def _messages(name: str, value: Any, where: str, errors: list[str], seen: set[str]) -> None:
    """A messages attribute: an array of the schema's items. The schemas let any part through
    as a ``GenericPart``, so each part of a known type is checked against its own definition
    too (a blob must have a modality, ...). A message already checked (the history a later
    call reads again) is not checked twice."""
    if not isinstance(value, list):
        errors.append(f"{where}: not an array")
        return
    item, parts = _item_validators(name)
    for m, message in enumerate(value):
        key = json.dumps(message, sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        errors += [f"{where}[{m}]: {e.message}" for e in item.iter_errors(message)]
        for p, part in enumerate(message.get("parts") or () if isinstance(message, dict) else ()):
            check = parts.get(part.get("type")) if isinstance(part, dict) else None
            if check is not None:
                errors += [f"{where}[{m}].parts[{p}]: {e.message}" for e in check.iter_errors(part)]


def _b64(hex_id: str) -> str:
    return base64.b64encode(bytes.fromhex(hex_id)).decode()


def otlp_request(doc: dict[str, Any]) -> Any:
    """Parse an OTLP JSON document with protobuf's JSON parser into opentelemetry-proto's
    ``ExportTraceServiceRequest``. OTLP/JSON writes trace and span ids as hex where protobuf's
    JSON mapping has base64 (the OTLP specification's one exception): they are turned into
    base64 first, as a collector's OTLP/JSON decoder does."""
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    data = copy.deepcopy(doc)
    for rs in data.get("resourceSpans", ()):
        for ss in rs.get("scopeSpans", ()):
            for span in ss.get("spans", ()):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = _b64(span[key])
                for link in span.get("links", ()):
                    link["traceId"], link["spanId"] = _b64(link["traceId"]), _b64(link["spanId"])
    return json_format.Parse(json.dumps(data), ExportTraceServiceRequest())


def attributes(span: dict[str, Any]) -> dict[str, Any]:
    """A span's attributes as a dict of plain values (JSON text attributes decoded)."""
    out: dict[str, Any] = {}
    for a in span.get("attributes", ()):
        ((kind, v),) = a["value"].items()
        if kind == "intValue":
            v = int(v)
        elif kind == "arrayValue":
            v = [next(iter(x.values())) for x in v.get("values", ())]
        out[a["key"]] = v
    return out


def requests(text: str) -> list[dict[str, Any]]:
    """The ``ExportTraceServiceRequest`` documents of an OTLP JSON Lines text, one a line."""
    assert text.endswith("\n") and "\n\n" not in text
    return [json.loads(line) for line in text[:-1].split("\n")]  # not splitlines: U+2028


def spans(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        s
        for doc in docs
        for rs in doc["resourceSpans"]
        for ss in rs["scopeSpans"]
        for s in ss["spans"]
    ]


def root_span(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The one span without a parent: the session's (written last, once its end is known)."""
    (root,) = [s for s in spans(docs) if "parentSpanId" not in s]
    return root


def otel_errors(docs: list[dict[str, Any]]) -> list[str]:
    """Problems of an OTLP JSON Lines trace (one request a line): protobuf's parser, ids and
    times, parents that exist, the GenAI attributes each span kind requires, and every messages
    attribute against its schema (and each part against its own type's definition)."""
    errors: list[str] = []
    parsed = []
    for n, doc in enumerate(docs, 1):
        try:
            request = otlp_request(doc)
        except Exception as exc:  # the parser's own error type is not ours to name
            return [f"line {n}: protobuf: {exc}"]
        parsed += [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    all_spans = spans(docs)
    seen: dict[str, set[str]] = {"input-messages": set(), "output-messages": set()}
    ids = {s["spanId"] for s in all_spans}
    if len(ids) != len(all_spans):
        errors.append("span ids are not unique")
    for s, p in zip(all_spans, parsed, strict=True):
        where = f"span {s['name']!r}"
        if len(p.trace_id) != 16 or len(p.span_id) != 8 or not any(p.span_id):
            errors.append(f"{where}: trace id {len(p.trace_id)} bytes, span id {len(p.span_id)}")
        if p.end_time_unix_nano < p.start_time_unix_nano or p.start_time_unix_nano == 0:
            errors.append(f"{where}: times {p.start_time_unix_nano} .. {p.end_time_unix_nano}")
        if "parentSpanId" in s and s["parentSpanId"] not in ids:
            errors.append(f"{where}: parent {s['parentSpanId']} is not in the trace")
        attrs = attributes(s)
        op = attrs.get("gen_ai.operation.name")
        required = {"chat": ("gen_ai.provider.name",), "execute_tool": ("gen_ai.tool.name",)}
        for key in required.get(op, ()):
            if not attrs.get(key):
                errors.append(f"{where}: {key} is required")
        for key, name in (
            ("gen_ai.input.messages", "input-messages"),
            ("gen_ai.output.messages", "output-messages"),
        ):
            if key in attrs:
                _messages(name, json.loads(attrs[key]), f"{where}: {key}", errors, seen[name])
        if "gen_ai.system_instructions" in attrs:
            value = json.loads(attrs["gen_ai.system_instructions"])
            check = jsonschema.Draft202012Validator(_otel_schema("system-instructions"))
            errors += [
                f"{where}: system instructions: {e.message}" for e in check.iter_errors(value)
            ]
    return errors
