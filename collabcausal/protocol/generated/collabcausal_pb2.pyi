from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class StudyState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STUDY_STATE_UNSPECIFIED: _ClassVar[StudyState]
    TASK: _ClassVar[StudyState]
    IDLE: _ClassVar[StudyState]
    DONE: _ClassVar[StudyState]
    FAILED: _ClassVar[StudyState]
STUDY_STATE_UNSPECIFIED: StudyState
TASK: StudyState
IDLE: StudyState
DONE: StudyState
FAILED: StudyState

class RegisterRequest(_message.Message):
    __slots__ = ("protocol_version", "party", "study", "software_version")
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    PARTY_FIELD_NUMBER: _ClassVar[int]
    STUDY_FIELD_NUMBER: _ClassVar[int]
    SOFTWARE_VERSION_FIELD_NUMBER: _ClassVar[int]
    protocol_version: int
    party: str
    study: str
    software_version: str
    def __init__(self, protocol_version: _Optional[int] = ..., party: _Optional[str] = ..., study: _Optional[str] = ..., software_version: _Optional[str] = ...) -> None: ...

class RegisterReply(_message.Message):
    __slots__ = ("protocol_version", "study", "party", "run_id")
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    STUDY_FIELD_NUMBER: _ClassVar[int]
    PARTY_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    protocol_version: int
    study: str
    party: str
    run_id: str
    def __init__(self, protocol_version: _Optional[int] = ..., study: _Optional[str] = ..., party: _Optional[str] = ..., run_id: _Optional[str] = ...) -> None: ...

class PullRequest(_message.Message):
    __slots__ = ("party", "run_id", "wait_ms")
    PARTY_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    party: str
    run_id: str
    wait_ms: int
    def __init__(self, party: _Optional[str] = ..., run_id: _Optional[str] = ..., wait_ms: _Optional[int] = ...) -> None: ...

class ArrayHeader(_message.Message):
    __slots__ = ("name", "dtype", "byte_order", "shape", "nbytes")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    BYTE_ORDER_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    NBYTES_FIELD_NUMBER: _ClassVar[int]
    name: str
    dtype: str
    byte_order: str
    shape: _containers.RepeatedScalarFieldContainer[int]
    nbytes: int
    def __init__(self, name: _Optional[str] = ..., dtype: _Optional[str] = ..., byte_order: _Optional[str] = ..., shape: _Optional[_Iterable[int]] = ..., nbytes: _Optional[int] = ...) -> None: ...

class Error(_message.Message):
    __slots__ = ("kind", "problem", "fix")
    KIND_FIELD_NUMBER: _ClassVar[int]
    PROBLEM_FIELD_NUMBER: _ClassVar[int]
    FIX_FIELD_NUMBER: _ClassVar[int]
    kind: str
    problem: str
    fix: str
    def __init__(self, kind: _Optional[str] = ..., problem: _Optional[str] = ..., fix: _Optional[str] = ...) -> None: ...

class MessageHeader(_message.Message):
    __slots__ = ("state", "task_id", "operation", "params_json", "arrays", "error", "detail")
    STATE_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
    ARRAYS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    state: StudyState
    task_id: str
    operation: str
    params_json: str
    arrays: _containers.RepeatedCompositeFieldContainer[ArrayHeader]
    error: Error
    detail: str
    def __init__(self, state: _Optional[_Union[StudyState, str]] = ..., task_id: _Optional[str] = ..., operation: _Optional[str] = ..., params_json: _Optional[str] = ..., arrays: _Optional[_Iterable[_Union[ArrayHeader, _Mapping]]] = ..., error: _Optional[_Union[Error, _Mapping]] = ..., detail: _Optional[str] = ...) -> None: ...

class Chunk(_message.Message):
    __slots__ = ("array", "data")
    ARRAY_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    array: int
    data: bytes
    def __init__(self, array: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class Frame(_message.Message):
    __slots__ = ("header", "chunk")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    header: MessageHeader
    chunk: Chunk
    def __init__(self, header: _Optional[_Union[MessageHeader, _Mapping]] = ..., chunk: _Optional[_Union[Chunk, _Mapping]] = ...) -> None: ...

class UploadAck(_message.Message):
    __slots__ = ("task_id", "accepted", "detail")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    accepted: bool
    detail: str
    def __init__(self, task_id: _Optional[str] = ..., accepted: _Optional[bool] = ..., detail: _Optional[str] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StatusReply(_message.Message):
    __slots__ = ("study", "state", "roster", "connected", "detail")
    STUDY_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ROSTER_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    study: str
    state: StudyState
    roster: _containers.RepeatedScalarFieldContainer[str]
    connected: _containers.RepeatedScalarFieldContainer[str]
    detail: str
    def __init__(self, study: _Optional[str] = ..., state: _Optional[_Union[StudyState, str]] = ..., roster: _Optional[_Iterable[str]] = ..., connected: _Optional[_Iterable[str]] = ..., detail: _Optional[str] = ...) -> None: ...
