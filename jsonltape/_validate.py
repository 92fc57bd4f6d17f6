"""The shape stage of the append pipeline: a core event's data, checked on the copy the
lossless gate decoded anyway.

:func:`jsonltape.events.validate_data` converts a dict into the data Struct and then checks each
content part in Python; that is the precise path that names what is wrong. Here the same shapes
are compiled into one typed data Struct per core type (content parts as a tagged union), so a
valid event is checked by a single C-level ``msgspec.convert`` of the data the gate decoded
(cheaper than decoding the line once more). Only when that fails (a bad event, or an extension
part type the union does not know) does the writer fall back to the precise path, which raises
the error or accepts the extension.
"""

from __future__ import annotations

from typing import Any, Union

import msgspec

from .events import CORE_TYPES, MESSAGE_ROLES, PART_TYPES, Message, validate_data

__all__ = ["validate_fast"]


def _tagged(kind: str, shape: type[msgspec.Struct]) -> Any:
    fields = [
        (f.name, f.type, f.default) if f.default is not msgspec.NODEFAULT else (f.name, f.type)
        for f in msgspec.structs.fields(shape)
    ]
    return msgspec.defstruct(f"_{shape.__name__}", fields, tag_field="type", tag=kind)


_PARTS = tuple(_tagged(kind, shape) for kind, shape in PART_TYPES.items())
_RESPONSE = _PARTS[list(PART_TYPES).index("tool_call_response")]
_FastMessage = msgspec.defstruct(
    "_FastMessage",
    [
        ("id", str),
        ("role", str),
        ("parts", list[Union[_PARTS]]),  # type: ignore[valid-type]
        ("name", Union[str, None], None),
    ],
)


def _fast_data(shape: type[msgspec.Struct]) -> Any:
    fields: list[Any] = []
    for f in msgspec.structs.fields(shape):
        type_ = _FastMessage if f.type is Message else f.type
        if f.default is msgspec.NODEFAULT:
            fields.append((f.name, type_))
        else:
            fields.append((f.name, type_, f.default))
    return msgspec.defstruct(f"_Fast{shape.__name__}", fields)


#: Core type -> its compiled data shape, made the first time the type is appended: a process
#: that appends one event type (the `append` command) does not build the other 23 (~1.3 ms).
#: Two threads may both build one; either shape checks the same, and one stays.
_SHAPES: dict[str, Any] = {}


def validate_fast(type_: str, decoded: dict[str, Any], data: dict[str, Any]) -> None:
    """Check a core type's data; raise InvalidEventError.

    ``decoded`` is the data as read back from the encoded line (plain JSON values), ``data``
    what the caller gave (used only to name a problem on the precise path).
    """
    shape = _SHAPES.get(type_)
    if shape is None:
        core = CORE_TYPES.get(type_)
        if core is None:
            return  # an extension type: its data is the extender's business
        shape = _SHAPES[type_] = _fast_data(core)
    try:
        typed = msgspec.convert(decoded, shape)
    except msgspec.ValidationError:
        validate_data(type_, data)  # names the problem, or accepts an extension part type
        return
    roles = MESSAGE_ROLES.get(type_)
    if roles is None:
        return
    message = typed.message
    ok = message.role in roles
    if ok and type_ == "tool/result":
        responses = [p for p in message.parts if type(p) is _RESPONSE]
        ok = len(responses) == 1 and responses[0].id == typed.call_id
    if not ok:
        validate_data(type_, data)  # raises with the precise reason
