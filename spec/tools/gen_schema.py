#!/usr/bin/env python3
"""Generate the JSON Schemas (draft 2020-12) of a jsonltape v1 event line from the library's models.

Usage::

    python spec/tools/gen_schema.py           # rewrite spec/schema/*.schema.json
    python spec/tools/gen_schema.py --check   # exit 1 if the checked-in schemas drifted

Two flavours, each one self-contained file that validates one parsed line (crc included):

* ``jsonltape-v1.reader.schema.json`` is **open**: unknown members are allowed everywhere and
  unknown event types only need the envelope. A file a v1.x writer produced validates against
  it. Readers validate with it; a reader must still accept any *good line* (§10.2) whether or
  not it matches the schema (the schema judges the content, the reader the framing).
* ``jsonltape-v1.writer.schema.json`` is **closed**: the envelope takes no unknown member, core
  data takes only its own members plus namespaced extension members (``com.example.x``,
  ``x-…``), optional members are omitted rather than null, and the per-type rules of §6 and §8
  (surface on model-visible types only, ``ignorable`` only ``true``, message roles, one
  ``tool_call_response`` per ``tool/result``) apply. It is what jsonltape's own writer emits.

The envelope, the header and every core event's data come from the msgspec Structs in
``jsonltape/events.py`` (``msgspec.json.schema_components``), so the schema cannot drift from the
code without ``--check`` (and tests/test_spec_schema.py) noticing. What a Struct cannot say (the
crc pattern, the integer range, per-type roles) is added below from the same module's
constants, in one visible place each.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path
from typing import Any

import msgspec

from jsonltape import events as ev

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schema"
FLAVOURS = ("reader", "writer")
DRAFT = "https://json-schema.org/draft/2020-12/schema"
MAX_SAFE = 2**53 - 1
#: Extension members inside data, parts and messages: reverse-DNS dotted names or ``x-…``.
EXTENSION_MEMBER = r"^(x-[A-Za-z0-9._-]+|[a-z0-9-]+(\.[a-z0-9-]+)+)$"
#: Definitions that stay open in the writer schema too: free-form data (streaming chunks) and
#: the generic part (an extension part type has members nobody can list).
OPEN_DEFS = frozenset({"AnyData", "Part"})


def _defs_name(t: type) -> str:
    return t.__name__


def components() -> dict[str, Any]:
    """The msgspec-generated ``$defs`` for the envelope, the header, core data and parts."""
    types: list[Any] = [ev.Event, *ev.CORE_TYPES.values(), *ev.PART_TYPES.values()]
    _, comps = msgspec.json.schema_components(types, ref_template="#/$defs/{name}")
    return dict(comps)


def _walk(node: Any, fn: Any) -> Any:
    """Apply ``fn`` bottom-up to every dict in a JSON tree; return the new tree."""
    if isinstance(node, dict):
        return fn({k: _walk(v, fn) for k, v in node.items()})
    if isinstance(node, list):
        return [_walk(v, fn) for v in node]
    return node


def _clean(node: dict[str, Any]) -> dict[str, Any]:
    """Both flavours: drop OpenAPI's ``discriminator`` (not a 2020-12 keyword), bound integers.

    The envelope Structs forbid unknown members only so that the reader's decode learns of
    them (and checks their bytes); the format allows them, so the schemas start open and only
    the writer flavour closes them (:func:`_closed`).
    """
    node.pop("discriminator", None)
    node.pop("additionalProperties", None)
    if node.get("type") == "integer":
        node.setdefault("minimum", -MAX_SAFE)
        node.setdefault("maximum", MAX_SAFE)
    return node


def _no_null(node: dict[str, Any]) -> dict[str, Any]:
    """Writer: optional members are omitted, never null (§6)."""
    any_of = node.get("anyOf")
    if isinstance(any_of, list) and {"type": "null"} in any_of:
        rest = [s for s in any_of if s != {"type": "null"}]
        node.pop("anyOf")
        if len(rest) == 1:
            node.update(rest[0])
        else:
            node["anyOf"] = rest
        if node.get("default", 0) is None:
            del node["default"]
    return node


def _closed(node: dict[str, Any]) -> dict[str, Any]:
    """Writer: an object with declared members takes no other member except extensions."""
    if node.get("type") == "object" and "properties" in node:
        node["patternProperties"] = {EXTENSION_MEMBER: {}}
        node["additionalProperties"] = False
    return node


def _part_defs(comps: dict[str, Any]) -> None:
    """Content parts: the part Structs have no ``type`` member (it is the dispatch key)."""
    for kind, struct in ev.PART_TYPES.items():
        d = comps[_defs_name(struct)]
        d["properties"] = {"type": {"const": kind}, **d["properties"]}
        d["required"] = ["type", *d.get("required", [])]
    rules = [
        {
            "if": {"properties": {"type": {"const": kind}}},
            "then": {"$ref": f"#/$defs/{_defs_name(struct)}"},
        }
        for kind, struct in ev.PART_TYPES.items()
    ]
    comps["Part"] = {
        "title": "Part",
        "description": "A content part: a known part type is checked against its shape; other "
        "part types are kept and shown generically (§8.2).",
        "type": "object",
        "properties": {"type": {"type": "string"}},
        "required": ["type"],
        "allOf": rules,
    }
    comps["Message"]["properties"]["parts"] = {"type": "array", "items": {"$ref": "#/$defs/Part"}}


def _type_rule(type_: str, then: dict[str, Any]) -> dict[str, Any]:
    return {
        "if": {"properties": {"type": {"const": type_}}, "required": ["type"]},
        "then": then,
    }


def _data_ref(struct: type) -> dict[str, Any]:
    return {"properties": {"data": {"$ref": f"#/$defs/{_defs_name(struct)}"}}}


def build(flavour: str) -> dict[str, Any]:
    writer = flavour == "writer"
    comps = components()
    comps["Envelope"] = comps.pop(_defs_name(ev.Event))
    env = comps["Envelope"]
    env["title"] = "Envelope"
    env["description"] = "The members of every line (§6); data is checked per type below."
    env["properties"]["crc"] = {
        "description": "CRC-32 of the line's bytes before the crc suffix, 8 lowercase hex (§5)",
        "type": "string",
        "pattern": "^[0-9a-f]{8}$",
    }
    env["required"] = [*env["required"], "crc"]
    env["properties"]["seq"]["minimum"] = 0
    _part_defs(comps)

    rules: list[dict[str, Any]] = []
    # The header: seq 0 only, this major version.
    header = comps[_defs_name(ev.HeaderData)]
    header["properties"]["version"] = {"const": ev.VERSION}
    header["properties"]["minor"]["minimum"] = 0
    rules.append(
        _type_rule(
            "session/start", {"properties": {"seq": {"const": 0}}, **_data_ref(ev.HeaderData)}
        )
    )
    for type_, struct in ev.CORE_TYPES.items():
        if type_ == "session/start":
            continue
        then: dict[str, Any] = copy.deepcopy(_data_ref(struct))
        if writer:
            extra = _writer_envelope_rule(type_)
            then["properties"].update(extra.pop("properties"))
            then.update(extra)
        roles = ev.MESSAGE_ROLES.get(type_)
        if roles is not None:
            msg: dict[str, Any] = {"properties": {"role": {"enum": list(roles)}}}
            if type_ == "tool/result":
                msg["properties"]["parts"] = {
                    "contains": {"properties": {"type": {"const": "tool_call_response"}}},
                    "minContains": 1,
                    "maxContains": 1,
                }
            then["properties"]["data"] = {
                "allOf": [then["properties"]["data"], {"properties": {"message": msg}}]
            }
        rules.append(_type_rule(type_, then))
    if writer:
        env["properties"]["type"]["pattern"] = ev._TYPE_NAME.pattern
        env["properties"]["ignorable"] = {"const": True}
        env["properties"]["sources"] = {
            "type": "array",
            "items": {"type": "integer", "minimum": 0},
            "uniqueItems": True,
        }
        env["properties"]["key"] = {"type": "string", "minLength": 1, "maxLength": 1024}
        rules.append(
            {
                "if": {"properties": {"type": {"enum": sorted(ev.CORE_TYPES)}}},
                "else": {"not": {"required": ["surface"]}},
            }
        )

    defs = _walk(comps, _clean)
    if writer:
        defs = _walk(defs, _no_null)
        for name, d in defs.items():
            if name not in OPEN_DEFS:
                defs[name] = _walk(d, _closed)
        # The envelope takes no extension member at all (the writer has no way to write one).
        defs["Envelope"].pop("patternProperties")
    title = f"jsonltape v{ev.VERSION} event line ({flavour} schema)"
    return {
        "$schema": DRAFT,
        "$id": f"urn:jsonltape:v{ev.VERSION}:event:{flavour}",
        "title": title,
        "description": (
            "Generated by spec/tools/gen_schema.py from jsonltape/events.py; do not edit. "
            + (
                "Closed: what a conforming writer emits (spec/README.md)."
                if writer
                else "Open: unknown members and unknown event types are allowed (§6, §9)."
            )
        ),
        "$ref": "#/$defs/Envelope",
        "allOf": _walk(rules, _clean),
        "$defs": dict(sorted(defs.items())),
    }


def _writer_envelope_rule(type_: str) -> dict[str, Any]:
    """Writer-only envelope rules of one core type (surface and ignorable, §6 and §8)."""
    props: dict[str, Any] = {}
    out: dict[str, Any] = {}
    required: list[str] = []
    if type_ in ev.SURFACE_TYPES:
        props["surface"] = {"anyOf": [{"const": "append"}, {"$ref": "#/$defs/Replace"}]}
        required.append("surface")
        out["not"] = {"required": ["ignorable"]}
    elif type_ == "surface/retract":
        props["surface"] = {"$ref": "#/$defs/Retract"}
        required.append("surface")
    else:
        out["not"] = {"required": ["surface"]}
    if type_ in ev.IGNORABLE_TYPES:
        required.append("ignorable")
    out["properties"] = props
    if required:
        out["required"] = required
    return out


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def expected_files() -> dict[str, str]:
    return {
        f"jsonltape-v{ev.VERSION}.{flavour}.schema.json": render(build(flavour))
        for flavour in FLAVOURS
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=SCHEMA_DIR, help="default: %(default)s")
    ap.add_argument("--check", action="store_true", help="compare with --out, write nothing")
    args = ap.parse_args(argv)
    files = expected_files()
    if args.check:
        stale = [
            name
            for name, text in files.items()
            if not (args.out / name).exists()
            or (args.out / name).read_text(encoding="utf-8") != text
        ]
        for name in stale:
            print(f"differs: {name}")
        print("schemas are up to date" if not stale else "rerun spec/tools/gen_schema.py")
        return 1 if stale else 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (args.out / name).write_text(text, encoding="utf-8")
        print(f"wrote {args.out / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
