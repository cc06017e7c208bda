"""Frame by frame: what a capture archive or binary-log file holds (`replicator archive inspect`)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, cast

from google.protobuf.message import DecodeError as ProtobufDecodeError
from google.protobuf.message import Message

from replicator.formats import archive, binlog
from replicator.formats.framing import PathLike

__all__ = ["format_inspect_entry", "inspect", "message_to_dict"]


def _all_tags() -> dict[int, tuple[str, type[Message]]]:
    return {**archive.TAGS, **binlog.TAGS}  # both formats share the frame and use distinct tags


def message_to_dict(msg: Message) -> dict[str, Any]:
    """Fields that are set (proto3 defaults included for scalars), recursively; bytes stay bytes."""
    out: dict[str, Any] = {}
    for field in msg.DESCRIPTOR.fields:
        if field.has_presence and not msg.HasField(field.name):
            out[field.name] = None
            continue
        value = getattr(msg, field.name)
        if field.message_type is not None:
            if field.is_repeated:
                out[field.name] = [message_to_dict(v) for v in value]
            else:
                out[field.name] = message_to_dict(value)
        else:
            out[field.name] = list(value) if field.is_repeated else value
    return out


def inspect(path: PathLike) -> Iterator[dict[str, Any]]:
    """Per frame of one file: offset, type, tag, length, size, crc_ok, decoded content, error.

    Frames with a bad CRC are reported (``crc_ok`` False) and the walk continues, since the
    length still locates the next frame; an impossible length or a truncated tail ends the
    walk by raising, after the frames before it. Binary-log files are understood too.
    """
    tags = _all_tags()
    where = os.fspath(path)
    for frame in archive.frame_reader(path, check_crc=False):
        name, msg_type = tags.get(frame.tag, (f"unknown({frame.tag:#04x})", None))
        entry: dict[str, Any] = {
            "file": where,
            "offset": frame.offset,
            "type": name,
            "tag": frame.tag,
            "length": len(frame.payload),
            "size": frame.size,
            "crc_ok": frame.crc_ok,
            "content": None,
            "error": None if frame.crc_ok else "bad CRC",
        }
        if msg_type is not None:
            msg = msg_type()
            try:
                msg.ParseFromString(frame.payload)
                entry["content"] = message_to_dict(msg)
                problem = "" if msg.IsInitialized() else ", ".join(cast(Any, msg).FindInitializationErrors())
                problem = f"missing required: {problem}" if problem else ""
            except ProtobufDecodeError as e:
                problem = f"undecodable: {e}"
            if problem:
                entry["error"] = f"{entry['error']}; {problem}" if entry["error"] else problem
        yield entry


def _render_value(value: Any, limit: int) -> str:
    if isinstance(value, bytes):
        shown = repr(value[:limit]) if limit else repr(value)
        return shown if not limit or len(value) <= limit else f"{shown}…({len(value)} bytes)"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={_render_value(v, limit)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_render_value(v, limit) for v in value) + "]"
    if isinstance(value, str):
        return repr(value)
    return "null" if value is None else str(value)


def format_inspect_entry(entry: dict[str, Any], *, limit: int = 120) -> str:
    """One line per frame: ``offset type len=N size=N crc=ok|BAD content``; bytes cut at ``limit``."""
    crc = "ok" if entry["crc_ok"] else "BAD"
    line = f"{entry['offset']:>12}  {entry['type']:<12} len={entry['length']:<8} crc={crc}"
    if entry["content"] is not None:
        line += "  " + _render_value(entry["content"], limit)
    if entry["error"]:
        line += f"  !! {entry['error']}"
    return line
