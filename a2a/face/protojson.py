"""The face's one reader of requests, for both bindings: bytes → checked, canonical params.

A2A 1.0 is defined in protobuf, and ProtoJSON parsers accept both the JSON name and the
proto field name of every field (``historyLength`` and ``history_length``), ignore unknown
fields, and take query parameters as strings (``"2"``, ``"false"``). :func:`read_params`
does the same, driven by the request message's descriptor from the official SDK's
``a2a_pb2``: it renames every known field to its JSON name (recursively, through messages,
lists and maps), drops unknown ones, converts query strings to the field's type, and then
validates the result with ``json_format.ParseDict``. Values inside ``Struct``/``Value``
fields (a message's ``metadata``, a data part) are kept exactly as sent: ParseDict would
turn ``1`` into ``1.0``.

Before anything is parsed, the body's nesting depth is bounded and every string (keys
included) is checked for NUL and lone surrogates (:mod:`platform_site.text`).
"""

from __future__ import annotations

import re
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.json_format import ParseDict, ParseError

from a2a.face.errors import (
    ContentTypeNotSupported,
    InvalidParams,
    InvalidRequest,
    JSONParseError,
    PayloadTooLarge,
)
from a2a.types import a2a_pb2 as pb
from platform_site.text import JSONTooDeep, find_bad_text, loads_bounded

JSON_CONTENT_TYPES = ("application/json", "application/a2a+json")

# The request message of each handler operation.
REQUESTS: dict[str, type[Any]] = {
    "send_message": pb.SendMessageRequest,
    "stream_message": pb.SendMessageRequest,
    "get_task": pb.GetTaskRequest,
    "list_tasks": pb.ListTasksRequest,
    "cancel_task": pb.CancelTaskRequest,
    "subscribe": pb.SubscribeToTaskRequest,
    "create_push_config": pb.TaskPushNotificationConfig,
    "get_push_config": pb.GetTaskPushNotificationConfigRequest,
    "list_push_configs": pb.ListTaskPushNotificationConfigsRequest,
    "delete_push_config": pb.DeleteTaskPushNotificationConfigRequest,
    "get_extended_card": pb.GetExtendedAgentCardRequest,
}

# Kept as sent: JSON values, and timestamps (the handler reads RFC 3339 itself).
_OPAQUE = {
    "google.protobuf.Struct",
    "google.protobuf.Value",
    "google.protobuf.ListValue",
    "google.protobuf.Timestamp",
}
_INTS = {
    FieldDescriptor.TYPE_INT32,
    FieldDescriptor.TYPE_INT64,
    FieldDescriptor.TYPE_UINT32,
    FieldDescriptor.TYPE_UINT64,
    FieldDescriptor.TYPE_SINT32,
    FieldDescriptor.TYPE_SINT64,
}


# --- the body -------------------------------------------------------------------------


def is_json_content_type(value: str | None) -> bool:
    media = (value or "").split(";", 1)[0].strip().lower()
    return media in JSON_CONTENT_TYPES or (
        media.startswith("application/") and media.endswith("+json")
    )


# A NUL or a lone surrogate can only reach parsed JSON through a \u escape (raw control
# characters are invalid JSON, and the body must be valid UTF-8): without one, the full
# check of every string can be skipped.
_SUSPECT_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")


def read_body(request: HttpRequest, *, required: bool) -> dict[str, Any]:
    """The request's JSON object, checked: content type first (before parsing), then the
    nesting depth (before the parser can recurse), then NUL and lone surrogates."""
    content_type = request.headers.get("Content-Type")
    try:
        body = request.body
    except RequestDataTooBig:
        raise PayloadTooLarge() from None
    if (body or content_type) and not is_json_content_type(content_type):
        raise ContentTypeNotSupported(
            f"Content type {content_type or '(none)'!r} is not supported; send application/json.",
            metadata={"contentType": (content_type or "")[:100]},
        )
    if not body.strip():
        if required:
            raise JSONParseError("The request body is empty; send a JSON object.")
        return {}
    try:
        text = body.decode("utf-8")
        data = loads_bounded(text)
    except JSONTooDeep as exc:
        raise InvalidRequest(str(exc), metadata={"maxDepth": exc.limit}) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise JSONParseError(f"Invalid JSON payload: {exc}") from None
    if not isinstance(data, dict):  # valid JSON, but not a request (no JSON-RPC batches)
        raise InvalidRequest("The request body must be a JSON object.")
    if _SUSPECT_ESCAPE.search(text):
        check_text(data)
    return data


def check_text(value: Any, where: str = "") -> None:
    """Refuse NUL and lone surrogates anywhere in ``value`` (keys too), naming the field."""
    bad = find_bad_text(value, where)
    if bad is not None:
        field = bad.where or "request"
        raise InvalidParams(str(bad), violations=[(field, bad.what)])


def query_params(request: HttpRequest) -> dict[str, Any]:
    """The query string as params (the last value of a repeated name), checked."""
    params = {key: request.GET.get(key) for key in request.GET}
    params.pop("A2A-Version", None)
    check_text(params)
    return params


# --- ProtoJSON names ------------------------------------------------------------------


_FIELDS: dict[str, dict[str, FieldDescriptor]] = {}


def _fields(desc: Descriptor) -> dict[str, FieldDescriptor]:
    """A message's fields by JSON name and by proto name (built once per message type)."""
    fields = _FIELDS.get(desc.full_name)
    if fields is None:
        fields = {}
        for field in desc.fields:
            fields[field.name] = field
            fields[field.json_name] = field
        _FIELDS[desc.full_name] = fields
    return fields


def _skeleton(desc: Descriptor, data: Any, path: str = "") -> Any:
    """``data`` (canonical) with the contents of JSON-valued fields left out, for ParseDict
    to check everything else: any JSON is a valid Value, and parsing a large data part into
    a Struct costs milliseconds for nothing. A message field whose value is no object (or
    a repeated one no list of objects) is refused here, naming it: ParseDict took a string
    there for a message with no fields set (each character an unknown field, ignored), and
    the code after it failed on it (a 500), or stored a part that is none."""
    if not isinstance(data, dict):
        return data
    fields = _fields(desc)
    out: dict[str, Any] = {}
    for key, value in data.items():
        field = fields[key]
        message = field.message_type
        where = f"{path}.{key}" if path else key
        if message is not None and not message.GetOptions().map_entry and value is not None:
            _check_kind(message, field, value, where)
        if message is None or message.GetOptions().map_entry:
            out[key] = value
        elif message.full_name == "google.protobuf.Value":
            # Any JSON is a Value; 0 stands for it (None would not count as set in a oneof).
            out[key] = [0 for _ in value] if field.is_repeated and isinstance(value, list) else 0
        elif message.full_name == "google.protobuf.Struct":
            out[key] = {} if isinstance(value, dict) else value
        elif message.full_name == "google.protobuf.ListValue":
            out[key] = [] if isinstance(value, list) else value
        elif message.full_name in _OPAQUE:
            out[key] = value
        elif field.is_repeated and isinstance(value, list):
            out[key] = [_skeleton(message, v, f"{where}[{i}]") for i, v in enumerate(value)]
        else:
            out[key] = _skeleton(message, value, where)
    return out


# Message types whose ProtoJSON form need not be an object: Value is any JSON, ListValue a
# list, the wrappers and well-known types their own scalars.
_NOT_OBJECTS = frozenset(
    {
        "google.protobuf.Value",
        "google.protobuf.ListValue",
        "google.protobuf.Timestamp",
        "google.protobuf.Duration",
        "google.protobuf.FieldMask",
        "google.protobuf.StringValue",
        "google.protobuf.BytesValue",
        "google.protobuf.BoolValue",
        "google.protobuf.Int32Value",
        "google.protobuf.Int64Value",
        "google.protobuf.UInt32Value",
        "google.protobuf.UInt64Value",
        "google.protobuf.FloatValue",
        "google.protobuf.DoubleValue",
    }
)


def _check_kind(message: Descriptor, field: FieldDescriptor, value: Any, where: str) -> None:
    """InvalidParams unless ``value`` has the kind ``field`` takes: an object for a message
    (a list of them when repeated)."""
    if message.full_name in _NOT_OBJECTS:
        return
    items = value if field.is_repeated and isinstance(value, list) else [value]
    if field.is_repeated and not isinstance(value, list):
        raise InvalidParams(f"Invalid params: {where} must be a list.")
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            at = f"{where}[{i}]" if field.is_repeated else where
            raise InvalidParams(f"Invalid params: {at} must be an object.")


def _scalar_from_query(field: FieldDescriptor, value: Any) -> Any:
    if not isinstance(value, str):
        return value
    if field.type in _INTS:
        text = value.strip()
        if text.lstrip("-").isdigit() and len(text) <= 20:
            return int(text)
    elif field.type == FieldDescriptor.TYPE_BOOL:
        if value.lower() in ("true", "1"):
            return True
        if value.lower() in ("false", "0"):
            return False
    return value


def _value(field: FieldDescriptor, value: Any, from_query: bool) -> Any:
    message = field.message_type
    if message is None:
        return _scalar_from_query(field, value) if from_query else value
    if message.full_name in _OPAQUE:
        return value
    if message.GetOptions().map_entry:
        inner = message.fields_by_name["value"]
        if not isinstance(value, dict) or inner.message_type is None:
            return value
        return {k: _value(inner, v, from_query) for k, v in value.items()}
    return canonical(message, value, from_query=from_query)


def canonical(desc: Descriptor, data: Any, *, from_query: bool = False) -> Any:
    """``data`` with every known field under its JSON name and unknown fields dropped.
    A value of the wrong kind is left as it is, for ParseDict to report."""
    if not isinstance(data, dict):
        return data
    fields = _fields(desc)
    out: dict[str, Any] = {}
    for key, value in data.items():
        field = fields.get(key)
        if field is None:
            continue
        if field.is_repeated and not (
            field.message_type is not None and field.message_type.GetOptions().map_entry
        ):
            if isinstance(value, list):
                value = [_value(field, v, from_query) for v in value]
            elif from_query:
                value = [_value(field, value, from_query)]
        else:
            value = _value(field, value, from_query)
        out[field.json_name] = value
    return out


def read_params(
    operation: str, raw: dict[str, Any], *, from_query: bool = False, checked: bool = False
) -> dict[str, Any]:
    """The params of ``operation`` from a parsed body or query string: checked for bad
    text (unless ``checked``: :func:`read_body` did), in canonical ProtoJSON names,
    validated against the request message."""
    if not checked:
        check_text(raw)
    proto = REQUESTS[operation]
    params = canonical(proto.DESCRIPTOR, raw, from_query=from_query)
    try:
        ParseDict(_skeleton(proto.DESCRIPTOR, params), proto(), ignore_unknown_fields=True)
    except (ParseError, TypeError, ValueError, AttributeError) as exc:
        raise InvalidParams(f"Invalid {proto.DESCRIPTOR.name}: {exc}"[:500]) from None
    return params
