# mypy: ignore-errors
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Header(_message.Message):
    __slots__ = ("timestamp", "server_id", "trans_id")
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    TRANS_ID_FIELD_NUMBER: _ClassVar[int]
    timestamp: int
    server_id: int
    trans_id: int
    def __init__(self, timestamp: _Optional[int] = ..., server_id: _Optional[int] = ..., trans_id: _Optional[int] = ...) -> None: ...

class Start(_message.Message):
    __slots__ = ("header", "server_version", "server_signature")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    SERVER_VERSION_FIELD_NUMBER: _ClassVar[int]
    SERVER_SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    header: Header
    server_version: int
    server_signature: str
    def __init__(self, header: _Optional[_Union[Header, _Mapping]] = ..., server_version: _Optional[int] = ..., server_signature: _Optional[str] = ...) -> None: ...

class Chain(_message.Message):
    __slots__ = ("header", "next")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIELD_NUMBER: _ClassVar[int]
    header: Header
    next: int
    def __init__(self, header: _Optional[_Union[Header, _Mapping]] = ..., next: _Optional[int] = ...) -> None: ...

class Query(_message.Message):
    __slots__ = ("header", "variable", "session_id", "query")
    class Variable(_message.Message):
        __slots__ = ("name", "value")
        NAME_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        name: str
        value: str
        def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    HEADER_FIELD_NUMBER: _ClassVar[int]
    VARIABLE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    header: Header
    variable: _containers.RepeatedCompositeFieldContainer[Query.Variable]
    session_id: int
    query: str
    def __init__(self, header: _Optional[_Union[Header, _Mapping]] = ..., variable: _Optional[_Iterable[_Union[Query.Variable, _Mapping]]] = ..., session_id: _Optional[int] = ..., query: _Optional[str] = ...) -> None: ...

class Commit(_message.Message):
    __slots__ = ("header",)
    HEADER_FIELD_NUMBER: _ClassVar[int]
    header: Header
    def __init__(self, header: _Optional[_Union[Header, _Mapping]] = ...) -> None: ...

class Rollback(_message.Message):
    __slots__ = ("header",)
    HEADER_FIELD_NUMBER: _ClassVar[int]
    header: Header
    def __init__(self, header: _Optional[_Union[Header, _Mapping]] = ...) -> None: ...
