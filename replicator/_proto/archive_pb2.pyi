# mypy: ignore-errors
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class ArchiveStart(_message.Message):
    __slots__ = ("format_version", "creator", "created_at_ns", "sequence", "previous")
    FORMAT_VERSION_FIELD_NUMBER: _ClassVar[int]
    CREATOR_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_NS_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_FIELD_NUMBER: _ClassVar[int]
    format_version: int
    creator: str
    created_at_ns: int
    sequence: int
    previous: int
    def __init__(self, format_version: _Optional[int] = ..., creator: _Optional[str] = ..., created_at_ns: _Optional[int] = ..., sequence: _Optional[int] = ..., previous: _Optional[int] = ...) -> None: ...

class Record(_message.Message):
    __slots__ = ("topic", "partition", "offset", "timestamp_ms", "key", "value", "protocol")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes
    value: bytes
    protocol: str
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., offset: _Optional[int] = ..., timestamp_ms: _Optional[int] = ..., key: _Optional[bytes] = ..., value: _Optional[bytes] = ..., protocol: _Optional[str] = ...) -> None: ...

class ArchiveChain(_message.Message):
    __slots__ = ("next", "sequence", "created_at_ns", "records")
    NEXT_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_NS_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    next: int
    sequence: int
    created_at_ns: int
    records: int
    def __init__(self, next: _Optional[int] = ..., sequence: _Optional[int] = ..., created_at_ns: _Optional[int] = ..., records: _Optional[int] = ...) -> None: ...
