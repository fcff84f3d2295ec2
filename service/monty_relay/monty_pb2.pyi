from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TypeOrigin(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TYPE_ORIGIN_UNSPECIFIED: _ClassVar[TypeOrigin]
    TYPE_ORIGIN_BUILTIN: _ClassVar[TypeOrigin]
    TYPE_ORIGIN_SANDBOX: _ClassVar[TypeOrigin]
    TYPE_ORIGIN_HOST: _ClassVar[TypeOrigin]

class Persistence(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PERSISTENCE_UNSPECIFIED: _ClassVar[Persistence]
    PERSISTENCE_EPHEMERAL: _ClassVar[Persistence]
    PERSISTENCE_STORED: _ClassVar[Persistence]

class TypeCheckFormat(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TYPE_CHECK_FORMAT_UNSPECIFIED: _ClassVar[TypeCheckFormat]
    TYPE_CHECK_FORMAT_FULL: _ClassVar[TypeCheckFormat]
    TYPE_CHECK_FORMAT_CONCISE: _ClassVar[TypeCheckFormat]
    TYPE_CHECK_FORMAT_AZURE: _ClassVar[TypeCheckFormat]
    TYPE_CHECK_FORMAT_JSON: _ClassVar[TypeCheckFormat]
    TYPE_CHECK_FORMAT_JSON_LINES: _ClassVar[TypeCheckFormat]
    TYPE_CHECK_FORMAT_RDJSON: _ClassVar[TypeCheckFormat]
    TYPE_CHECK_FORMAT_PYLINT: _ClassVar[TypeCheckFormat]
    TYPE_CHECK_FORMAT_GITLAB: _ClassVar[TypeCheckFormat]
    TYPE_CHECK_FORMAT_GITHUB: _ClassVar[TypeCheckFormat]

class PrintStream(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PRINT_STREAM_UNSPECIFIED: _ClassVar[PrintStream]
    PRINT_STREAM_STDOUT: _ClassVar[PrintStream]
    PRINT_STREAM_STDERR: _ClassVar[PrintStream]
TYPE_ORIGIN_UNSPECIFIED: TypeOrigin
TYPE_ORIGIN_BUILTIN: TypeOrigin
TYPE_ORIGIN_SANDBOX: TypeOrigin
TYPE_ORIGIN_HOST: TypeOrigin
PERSISTENCE_UNSPECIFIED: Persistence
PERSISTENCE_EPHEMERAL: Persistence
PERSISTENCE_STORED: Persistence
TYPE_CHECK_FORMAT_UNSPECIFIED: TypeCheckFormat
TYPE_CHECK_FORMAT_FULL: TypeCheckFormat
TYPE_CHECK_FORMAT_CONCISE: TypeCheckFormat
TYPE_CHECK_FORMAT_AZURE: TypeCheckFormat
TYPE_CHECK_FORMAT_JSON: TypeCheckFormat
TYPE_CHECK_FORMAT_JSON_LINES: TypeCheckFormat
TYPE_CHECK_FORMAT_RDJSON: TypeCheckFormat
TYPE_CHECK_FORMAT_PYLINT: TypeCheckFormat
TYPE_CHECK_FORMAT_GITLAB: TypeCheckFormat
TYPE_CHECK_FORMAT_GITHUB: TypeCheckFormat
PRINT_STREAM_UNSPECIFIED: PrintStream
PRINT_STREAM_STDOUT: PrintStream
PRINT_STREAM_STDERR: PrintStream

class Unit(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Arena(_message.Message):
    __slots__ = ("node_count", "nodes")
    NODE_COUNT_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    node_count: int
    nodes: _containers.RepeatedCompositeFieldContainer[MontyNode]
    def __init__(self, node_count: _Optional[int] = ..., nodes: _Optional[_Iterable[_Union[MontyNode, _Mapping]]] = ...) -> None: ...

class MontyNode(_message.Message):
    __slots__ = ("ellipsis", "none", "not_implemented", "boolean", "int", "bigint", "float", "str", "bytes", "uuid", "list", "tuple", "named_tuple", "dict", "set", "frozen_set", "date", "time", "datetime", "timedelta", "timezone", "exception", "type", "class_instance", "function", "builtin_function", "path", "file_handle", "repr", "cycle", "complex", "module", "decimal")
    ELLIPSIS_FIELD_NUMBER: _ClassVar[int]
    NONE_FIELD_NUMBER: _ClassVar[int]
    NOT_IMPLEMENTED_FIELD_NUMBER: _ClassVar[int]
    BOOLEAN_FIELD_NUMBER: _ClassVar[int]
    INT_FIELD_NUMBER: _ClassVar[int]
    BIGINT_FIELD_NUMBER: _ClassVar[int]
    FLOAT_FIELD_NUMBER: _ClassVar[int]
    STR_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    UUID_FIELD_NUMBER: _ClassVar[int]
    LIST_FIELD_NUMBER: _ClassVar[int]
    TUPLE_FIELD_NUMBER: _ClassVar[int]
    NAMED_TUPLE_FIELD_NUMBER: _ClassVar[int]
    DICT_FIELD_NUMBER: _ClassVar[int]
    SET_FIELD_NUMBER: _ClassVar[int]
    FROZEN_SET_FIELD_NUMBER: _ClassVar[int]
    DATE_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    DATETIME_FIELD_NUMBER: _ClassVar[int]
    TIMEDELTA_FIELD_NUMBER: _ClassVar[int]
    TIMEZONE_FIELD_NUMBER: _ClassVar[int]
    EXCEPTION_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    CLASS_INSTANCE_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_FIELD_NUMBER: _ClassVar[int]
    BUILTIN_FUNCTION_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    FILE_HANDLE_FIELD_NUMBER: _ClassVar[int]
    REPR_FIELD_NUMBER: _ClassVar[int]
    CYCLE_FIELD_NUMBER: _ClassVar[int]
    COMPLEX_FIELD_NUMBER: _ClassVar[int]
    MODULE_FIELD_NUMBER: _ClassVar[int]
    DECIMAL_FIELD_NUMBER: _ClassVar[int]
    ellipsis: Unit
    none: Unit
    not_implemented: Unit
    boolean: bool
    int: int
    bigint: BigInt
    float: float
    str: str
    bytes: bytes
    uuid: Uuid
    list: Indexes
    tuple: Indexes
    named_tuple: NamedTupleNode
    dict: NodePairs
    set: Indexes
    frozen_set: Indexes
    date: Date
    time: Time
    datetime: DateTime
    timedelta: TimeDelta
    timezone: TimeZone
    exception: Exception
    type: Type
    class_instance: ClassInstanceNode
    function: Function
    builtin_function: str
    path: str
    file_handle: FileHandle
    repr: str
    cycle: str
    complex: Complex
    module: ModuleNode
    decimal: str
    def __init__(self, ellipsis: _Optional[_Union[Unit, _Mapping]] = ..., none: _Optional[_Union[Unit, _Mapping]] = ..., not_implemented: _Optional[_Union[Unit, _Mapping]] = ..., boolean: _Optional[bool] = ..., int: _Optional[int] = ..., bigint: _Optional[_Union[BigInt, _Mapping]] = ..., float: _Optional[float] = ..., str: _Optional[str] = ..., bytes: _Optional[bytes] = ..., uuid: _Optional[_Union[Uuid, _Mapping]] = ..., list: _Optional[_Union[Indexes, _Mapping]] = ..., tuple: _Optional[_Union[Indexes, _Mapping]] = ..., named_tuple: _Optional[_Union[NamedTupleNode, _Mapping]] = ..., dict: _Optional[_Union[NodePairs, _Mapping]] = ..., set: _Optional[_Union[Indexes, _Mapping]] = ..., frozen_set: _Optional[_Union[Indexes, _Mapping]] = ..., date: _Optional[_Union[Date, _Mapping]] = ..., time: _Optional[_Union[Time, _Mapping]] = ..., datetime: _Optional[_Union[DateTime, _Mapping]] = ..., timedelta: _Optional[_Union[TimeDelta, _Mapping]] = ..., timezone: _Optional[_Union[TimeZone, _Mapping]] = ..., exception: _Optional[_Union[Exception, _Mapping]] = ..., type: _Optional[_Union[Type, _Mapping]] = ..., class_instance: _Optional[_Union[ClassInstanceNode, _Mapping]] = ..., function: _Optional[_Union[Function, _Mapping]] = ..., builtin_function: _Optional[str] = ..., path: _Optional[str] = ..., file_handle: _Optional[_Union[FileHandle, _Mapping]] = ..., repr: _Optional[str] = ..., cycle: _Optional[str] = ..., complex: _Optional[_Union[Complex, _Mapping]] = ..., module: _Optional[_Union[ModuleNode, _Mapping]] = ..., decimal: _Optional[str] = ...) -> None: ...

class Indexes(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, items: _Optional[_Iterable[int]] = ...) -> None: ...

class NodePair(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: int
    value: int
    def __init__(self, key: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...

class NodePairs(_message.Message):
    __slots__ = ("pairs",)
    PAIRS_FIELD_NUMBER: _ClassVar[int]
    pairs: _containers.RepeatedCompositeFieldContainer[NodePair]
    def __init__(self, pairs: _Optional[_Iterable[_Union[NodePair, _Mapping]]] = ...) -> None: ...

class BigInt(_message.Message):
    __slots__ = ("negative", "magnitude")
    NEGATIVE_FIELD_NUMBER: _ClassVar[int]
    MAGNITUDE_FIELD_NUMBER: _ClassVar[int]
    negative: bool
    magnitude: bytes
    def __init__(self, negative: _Optional[bool] = ..., magnitude: _Optional[bytes] = ...) -> None: ...

class Complex(_message.Message):
    __slots__ = ("real", "imag")
    REAL_FIELD_NUMBER: _ClassVar[int]
    IMAG_FIELD_NUMBER: _ClassVar[int]
    real: float
    imag: float
    def __init__(self, real: _Optional[float] = ..., imag: _Optional[float] = ...) -> None: ...

class NamedTupleNode(_message.Message):
    __slots__ = ("type_name", "field_names", "values")
    TYPE_NAME_FIELD_NUMBER: _ClassVar[int]
    FIELD_NAMES_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    type_name: str
    field_names: _containers.RepeatedScalarFieldContainer[str]
    values: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, type_name: _Optional[str] = ..., field_names: _Optional[_Iterable[str]] = ..., values: _Optional[_Iterable[int]] = ...) -> None: ...

class Date(_message.Message):
    __slots__ = ("year", "month", "day")
    YEAR_FIELD_NUMBER: _ClassVar[int]
    MONTH_FIELD_NUMBER: _ClassVar[int]
    DAY_FIELD_NUMBER: _ClassVar[int]
    year: int
    month: int
    day: int
    def __init__(self, year: _Optional[int] = ..., month: _Optional[int] = ..., day: _Optional[int] = ...) -> None: ...

class DateTime(_message.Message):
    __slots__ = ("year", "month", "day", "hour", "minute", "second", "microsecond", "offset_seconds", "timezone_name")
    YEAR_FIELD_NUMBER: _ClassVar[int]
    MONTH_FIELD_NUMBER: _ClassVar[int]
    DAY_FIELD_NUMBER: _ClassVar[int]
    HOUR_FIELD_NUMBER: _ClassVar[int]
    MINUTE_FIELD_NUMBER: _ClassVar[int]
    SECOND_FIELD_NUMBER: _ClassVar[int]
    MICROSECOND_FIELD_NUMBER: _ClassVar[int]
    OFFSET_SECONDS_FIELD_NUMBER: _ClassVar[int]
    TIMEZONE_NAME_FIELD_NUMBER: _ClassVar[int]
    year: int
    month: int
    day: int
    hour: int
    minute: int
    second: int
    microsecond: int
    offset_seconds: int
    timezone_name: str
    def __init__(self, year: _Optional[int] = ..., month: _Optional[int] = ..., day: _Optional[int] = ..., hour: _Optional[int] = ..., minute: _Optional[int] = ..., second: _Optional[int] = ..., microsecond: _Optional[int] = ..., offset_seconds: _Optional[int] = ..., timezone_name: _Optional[str] = ...) -> None: ...

class Time(_message.Message):
    __slots__ = ("hour", "minute", "second", "microsecond", "offset_seconds", "timezone_name", "fold")
    HOUR_FIELD_NUMBER: _ClassVar[int]
    MINUTE_FIELD_NUMBER: _ClassVar[int]
    SECOND_FIELD_NUMBER: _ClassVar[int]
    MICROSECOND_FIELD_NUMBER: _ClassVar[int]
    OFFSET_SECONDS_FIELD_NUMBER: _ClassVar[int]
    TIMEZONE_NAME_FIELD_NUMBER: _ClassVar[int]
    FOLD_FIELD_NUMBER: _ClassVar[int]
    hour: int
    minute: int
    second: int
    microsecond: int
    offset_seconds: int
    timezone_name: str
    fold: int
    def __init__(self, hour: _Optional[int] = ..., minute: _Optional[int] = ..., second: _Optional[int] = ..., microsecond: _Optional[int] = ..., offset_seconds: _Optional[int] = ..., timezone_name: _Optional[str] = ..., fold: _Optional[int] = ...) -> None: ...

class TimeDelta(_message.Message):
    __slots__ = ("days", "seconds", "microseconds")
    DAYS_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    MICROSECONDS_FIELD_NUMBER: _ClassVar[int]
    days: int
    seconds: int
    microseconds: int
    def __init__(self, days: _Optional[int] = ..., seconds: _Optional[int] = ..., microseconds: _Optional[int] = ...) -> None: ...

class TimeZone(_message.Message):
    __slots__ = ("offset_seconds", "name")
    OFFSET_SECONDS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    offset_seconds: int
    name: str
    def __init__(self, offset_seconds: _Optional[int] = ..., name: _Optional[str] = ...) -> None: ...

class Exception(_message.Message):
    __slots__ = ("exc_type", "arg")
    EXC_TYPE_FIELD_NUMBER: _ClassVar[int]
    ARG_FIELD_NUMBER: _ClassVar[int]
    exc_type: str
    arg: str
    def __init__(self, exc_type: _Optional[str] = ..., arg: _Optional[str] = ...) -> None: ...

class FileHandle(_message.Message):
    __slots__ = ("path", "mode", "position")
    PATH_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    path: str
    mode: str
    position: int
    def __init__(self, path: _Optional[str] = ..., mode: _Optional[str] = ..., position: _Optional[int] = ...) -> None: ...

class Uuid(_message.Message):
    __slots__ = ("data",)
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    def __init__(self, data: _Optional[bytes] = ...) -> None: ...

class Type(_message.Message):
    __slots__ = ("name", "id", "origin", "is_dataclass", "attrs")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    IS_DATACLASS_FIELD_NUMBER: _ClassVar[int]
    ATTRS_FIELD_NUMBER: _ClassVar[int]
    name: str
    id: Uuid
    origin: TypeOrigin
    is_dataclass: bool
    attrs: NodePairs
    def __init__(self, name: _Optional[str] = ..., id: _Optional[_Union[Uuid, _Mapping]] = ..., origin: _Optional[_Union[TypeOrigin, str]] = ..., is_dataclass: _Optional[bool] = ..., attrs: _Optional[_Union[NodePairs, _Mapping]] = ...) -> None: ...

class ClassInstanceNode(_message.Message):
    __slots__ = ("class_type", "instance_id", "attrs")
    CLASS_TYPE_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    ATTRS_FIELD_NUMBER: _ClassVar[int]
    class_type: int
    instance_id: Uuid
    attrs: NodePairs
    def __init__(self, class_type: _Optional[int] = ..., instance_id: _Optional[_Union[Uuid, _Mapping]] = ..., attrs: _Optional[_Union[NodePairs, _Mapping]] = ...) -> None: ...

class ModuleNode(_message.Message):
    __slots__ = ("name", "id", "attrs")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    ATTRS_FIELD_NUMBER: _ClassVar[int]
    name: str
    id: Uuid
    attrs: NodePairs
    def __init__(self, name: _Optional[str] = ..., id: _Optional[_Union[Uuid, _Mapping]] = ..., attrs: _Optional[_Union[NodePairs, _Mapping]] = ...) -> None: ...

class Function(_message.Message):
    __slots__ = ("name", "docstring")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DOCSTRING_FIELD_NUMBER: _ClassVar[int]
    name: str
    docstring: str
    def __init__(self, name: _Optional[str] = ..., docstring: _Optional[str] = ...) -> None: ...

class RaisedException(_message.Message):
    __slots__ = ("exc_type", "message", "traceback", "data")
    EXC_TYPE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TRACEBACK_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    exc_type: str
    message: str
    traceback: _containers.RepeatedCompositeFieldContainer[StackFrame]
    data: ExcData
    def __init__(self, exc_type: _Optional[str] = ..., message: _Optional[str] = ..., traceback: _Optional[_Iterable[_Union[StackFrame, _Mapping]]] = ..., data: _Optional[_Union[ExcData, _Mapping]] = ...) -> None: ...

class ExcData(_message.Message):
    __slots__ = ("unicode", "json")
    UNICODE_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    unicode: UnicodeErrorData
    json: JsonErrorData
    def __init__(self, unicode: _Optional[_Union[UnicodeErrorData, _Mapping]] = ..., json: _Optional[_Union[JsonErrorData, _Mapping]] = ...) -> None: ...

class UnicodeErrorData(_message.Message):
    __slots__ = ("encoding", "object_bytes", "object_str", "start", "end", "reason")
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    OBJECT_BYTES_FIELD_NUMBER: _ClassVar[int]
    OBJECT_STR_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    encoding: str
    object_bytes: bytes
    object_str: str
    start: int
    end: int
    reason: str
    def __init__(self, encoding: _Optional[str] = ..., object_bytes: _Optional[bytes] = ..., object_str: _Optional[str] = ..., start: _Optional[int] = ..., end: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class JsonErrorData(_message.Message):
    __slots__ = ("msg", "doc", "pos", "lineno", "colno")
    MSG_FIELD_NUMBER: _ClassVar[int]
    DOC_FIELD_NUMBER: _ClassVar[int]
    POS_FIELD_NUMBER: _ClassVar[int]
    LINENO_FIELD_NUMBER: _ClassVar[int]
    COLNO_FIELD_NUMBER: _ClassVar[int]
    msg: str
    doc: str
    pos: int
    lineno: int
    colno: int
    def __init__(self, msg: _Optional[str] = ..., doc: _Optional[str] = ..., pos: _Optional[int] = ..., lineno: _Optional[int] = ..., colno: _Optional[int] = ...) -> None: ...

class CodeLoc(_message.Message):
    __slots__ = ("line", "column")
    LINE_FIELD_NUMBER: _ClassVar[int]
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    line: int
    column: int
    def __init__(self, line: _Optional[int] = ..., column: _Optional[int] = ...) -> None: ...

class SourceRange(_message.Message):
    __slots__ = ("filename", "start", "end")
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    filename: str
    start: int
    end: int
    def __init__(self, filename: _Optional[str] = ..., start: _Optional[int] = ..., end: _Optional[int] = ...) -> None: ...

class StackFrame(_message.Message):
    __slots__ = ("filename", "start", "end", "frame_name", "preview_line", "hide_caret", "hide_frame_name")
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    FRAME_NAME_FIELD_NUMBER: _ClassVar[int]
    PREVIEW_LINE_FIELD_NUMBER: _ClassVar[int]
    HIDE_CARET_FIELD_NUMBER: _ClassVar[int]
    HIDE_FRAME_NAME_FIELD_NUMBER: _ClassVar[int]
    filename: str
    start: CodeLoc
    end: CodeLoc
    frame_name: str
    preview_line: str
    hide_caret: bool
    hide_frame_name: bool
    def __init__(self, filename: _Optional[str] = ..., start: _Optional[_Union[CodeLoc, _Mapping]] = ..., end: _Optional[_Union[CodeLoc, _Mapping]] = ..., frame_name: _Optional[str] = ..., preview_line: _Optional[str] = ..., hide_caret: _Optional[bool] = ..., hide_frame_name: _Optional[bool] = ...) -> None: ...

class ResourceLimits(_message.Message):
    __slots__ = ("max_memory_bytes", "gc_interval", "max_recursion_depth", "max_suspensions", "max_feed_duration_micros", "max_turn_duration_micros", "max_total_sleep_micros")
    MAX_MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    GC_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    MAX_RECURSION_DEPTH_FIELD_NUMBER: _ClassVar[int]
    MAX_SUSPENSIONS_FIELD_NUMBER: _ClassVar[int]
    MAX_FEED_DURATION_MICROS_FIELD_NUMBER: _ClassVar[int]
    MAX_TURN_DURATION_MICROS_FIELD_NUMBER: _ClassVar[int]
    MAX_TOTAL_SLEEP_MICROS_FIELD_NUMBER: _ClassVar[int]
    max_memory_bytes: int
    gc_interval: int
    max_recursion_depth: int
    max_suspensions: int
    max_feed_duration_micros: int
    max_turn_duration_micros: int
    max_total_sleep_micros: int
    def __init__(self, max_memory_bytes: _Optional[int] = ..., gc_interval: _Optional[int] = ..., max_recursion_depth: _Optional[int] = ..., max_suspensions: _Optional[int] = ..., max_feed_duration_micros: _Optional[int] = ..., max_turn_duration_micros: _Optional[int] = ..., max_total_sleep_micros: _Optional[int] = ...) -> None: ...

class OsPolicy(_message.Message):
    __slots__ = ("system", "call_host", "fixed", "timezone", "sleep", "random_system", "random_call_host", "seed", "zero", "elapsed")
    SYSTEM_FIELD_NUMBER: _ClassVar[int]
    CALL_HOST_FIELD_NUMBER: _ClassVar[int]
    FIXED_FIELD_NUMBER: _ClassVar[int]
    TIMEZONE_FIELD_NUMBER: _ClassVar[int]
    SLEEP_FIELD_NUMBER: _ClassVar[int]
    RANDOM_SYSTEM_FIELD_NUMBER: _ClassVar[int]
    RANDOM_CALL_HOST_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    ZERO_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_FIELD_NUMBER: _ClassVar[int]
    system: Unit
    call_host: Unit
    fixed: FixedDateTime
    timezone: SandboxTimeZone
    sleep: SleepMode
    random_system: Unit
    random_call_host: Unit
    seed: RandomSeed
    zero: Unit
    elapsed: Unit
    def __init__(self, system: _Optional[_Union[Unit, _Mapping]] = ..., call_host: _Optional[_Union[Unit, _Mapping]] = ..., fixed: _Optional[_Union[FixedDateTime, _Mapping]] = ..., timezone: _Optional[_Union[SandboxTimeZone, _Mapping]] = ..., sleep: _Optional[_Union[SleepMode, _Mapping]] = ..., random_system: _Optional[_Union[Unit, _Mapping]] = ..., random_call_host: _Optional[_Union[Unit, _Mapping]] = ..., seed: _Optional[_Union[RandomSeed, _Mapping]] = ..., zero: _Optional[_Union[Unit, _Mapping]] = ..., elapsed: _Optional[_Union[Unit, _Mapping]] = ...) -> None: ...

class SandboxTimeZone(_message.Message):
    __slots__ = ("utc", "named", "fixed")
    UTC_FIELD_NUMBER: _ClassVar[int]
    NAMED_FIELD_NUMBER: _ClassVar[int]
    FIXED_FIELD_NUMBER: _ClassVar[int]
    utc: Unit
    named: str
    fixed: TimeZone
    def __init__(self, utc: _Optional[_Union[Unit, _Mapping]] = ..., named: _Optional[str] = ..., fixed: _Optional[_Union[TimeZone, _Mapping]] = ...) -> None: ...

class SleepMode(_message.Message):
    __slots__ = ("system", "call_host", "zero")
    SYSTEM_FIELD_NUMBER: _ClassVar[int]
    CALL_HOST_FIELD_NUMBER: _ClassVar[int]
    ZERO_FIELD_NUMBER: _ClassVar[int]
    system: SystemSleep
    call_host: Unit
    zero: Unit
    def __init__(self, system: _Optional[_Union[SystemSleep, _Mapping]] = ..., call_host: _Optional[_Union[Unit, _Mapping]] = ..., zero: _Optional[_Union[Unit, _Mapping]] = ...) -> None: ...

class SystemSleep(_message.Message):
    __slots__ = ("max_micros",)
    MAX_MICROS_FIELD_NUMBER: _ClassVar[int]
    max_micros: int
    def __init__(self, max_micros: _Optional[int] = ...) -> None: ...

class FixedDateTime(_message.Message):
    __slots__ = ("unix_seconds", "microsecond")
    UNIX_SECONDS_FIELD_NUMBER: _ClassVar[int]
    MICROSECOND_FIELD_NUMBER: _ClassVar[int]
    unix_seconds: int
    microsecond: int
    def __init__(self, unix_seconds: _Optional[int] = ..., microsecond: _Optional[int] = ...) -> None: ...

class RandomSeed(_message.Message):
    __slots__ = ("int", "float", "str", "bytes")
    INT_FIELD_NUMBER: _ClassVar[int]
    FLOAT_FIELD_NUMBER: _ClassVar[int]
    STR_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    int: bytes
    float: float
    str: str
    bytes: bytes
    def __init__(self, int: _Optional[bytes] = ..., float: _Optional[float] = ..., str: _Optional[str] = ..., bytes: _Optional[bytes] = ...) -> None: ...

class ExtFunctionResult(_message.Message):
    __slots__ = ("return_value", "error", "future", "not_found", "not_handled")
    RETURN_VALUE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FUTURE_FIELD_NUMBER: _ClassVar[int]
    NOT_FOUND_FIELD_NUMBER: _ClassVar[int]
    NOT_HANDLED_FIELD_NUMBER: _ClassVar[int]
    return_value: int
    error: RaisedException
    future: int
    not_found: str
    not_handled: Unit
    def __init__(self, return_value: _Optional[int] = ..., error: _Optional[_Union[RaisedException, _Mapping]] = ..., future: _Optional[int] = ..., not_found: _Optional[str] = ..., not_handled: _Optional[_Union[Unit, _Mapping]] = ...) -> None: ...

class FutureResult(_message.Message):
    __slots__ = ("call_id", "result")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    call_id: int
    result: ExtFunctionResult
    def __init__(self, call_id: _Optional[int] = ..., result: _Optional[_Union[ExtFunctionResult, _Mapping]] = ...) -> None: ...

class NamedRef(_message.Message):
    __slots__ = ("name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: int
    def __init__(self, name: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...

class ParentRequest(_message.Message):
    __slots__ = ("configure", "install_dependencies", "feed", "resume_call", "resume_name_lookup", "resume_futures", "dump", "load", "reset", "shutdown", "abort_feed", "trace_parent")
    CONFIGURE_FIELD_NUMBER: _ClassVar[int]
    INSTALL_DEPENDENCIES_FIELD_NUMBER: _ClassVar[int]
    FEED_FIELD_NUMBER: _ClassVar[int]
    RESUME_CALL_FIELD_NUMBER: _ClassVar[int]
    RESUME_NAME_LOOKUP_FIELD_NUMBER: _ClassVar[int]
    RESUME_FUTURES_FIELD_NUMBER: _ClassVar[int]
    DUMP_FIELD_NUMBER: _ClassVar[int]
    LOAD_FIELD_NUMBER: _ClassVar[int]
    RESET_FIELD_NUMBER: _ClassVar[int]
    SHUTDOWN_FIELD_NUMBER: _ClassVar[int]
    ABORT_FEED_FIELD_NUMBER: _ClassVar[int]
    TRACE_PARENT_FIELD_NUMBER: _ClassVar[int]
    configure: Configure
    install_dependencies: InstallDependencies
    feed: Feed
    resume_call: ResumeCall
    resume_name_lookup: ResumeNameLookup
    resume_futures: ResumeFutures
    dump: Dump
    load: Load
    reset: Reset
    shutdown: Shutdown
    abort_feed: AbortFeed
    trace_parent: str
    def __init__(self, configure: _Optional[_Union[Configure, _Mapping]] = ..., install_dependencies: _Optional[_Union[InstallDependencies, _Mapping]] = ..., feed: _Optional[_Union[Feed, _Mapping]] = ..., resume_call: _Optional[_Union[ResumeCall, _Mapping]] = ..., resume_name_lookup: _Optional[_Union[ResumeNameLookup, _Mapping]] = ..., resume_futures: _Optional[_Union[ResumeFutures, _Mapping]] = ..., dump: _Optional[_Union[Dump, _Mapping]] = ..., load: _Optional[_Union[Load, _Mapping]] = ..., reset: _Optional[_Union[Reset, _Mapping]] = ..., shutdown: _Optional[_Union[Shutdown, _Mapping]] = ..., abort_feed: _Optional[_Union[AbortFeed, _Mapping]] = ..., trace_parent: _Optional[str] = ...) -> None: ...

class Configure(_message.Message):
    __slots__ = ("script_name", "limits", "type_check", "type_check_stubs", "monty_version", "assert_message_annotations", "type_check_format", "type_check_color", "protocol_version", "print_flush_interval_ms", "os_policy", "persistence", "profile")
    SCRIPT_NAME_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    TYPE_CHECK_FIELD_NUMBER: _ClassVar[int]
    TYPE_CHECK_STUBS_FIELD_NUMBER: _ClassVar[int]
    MONTY_VERSION_FIELD_NUMBER: _ClassVar[int]
    ASSERT_MESSAGE_ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    TYPE_CHECK_FORMAT_FIELD_NUMBER: _ClassVar[int]
    TYPE_CHECK_COLOR_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    PRINT_FLUSH_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    OS_POLICY_FIELD_NUMBER: _ClassVar[int]
    PERSISTENCE_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    script_name: str
    limits: ResourceLimits
    type_check: bool
    type_check_stubs: str
    monty_version: str
    assert_message_annotations: int
    type_check_format: TypeCheckFormat
    type_check_color: bool
    protocol_version: int
    print_flush_interval_ms: int
    os_policy: OsPolicy
    persistence: Persistence
    profile: str
    def __init__(self, script_name: _Optional[str] = ..., limits: _Optional[_Union[ResourceLimits, _Mapping]] = ..., type_check: _Optional[bool] = ..., type_check_stubs: _Optional[str] = ..., monty_version: _Optional[str] = ..., assert_message_annotations: _Optional[int] = ..., type_check_format: _Optional[_Union[TypeCheckFormat, str]] = ..., type_check_color: _Optional[bool] = ..., protocol_version: _Optional[int] = ..., print_flush_interval_ms: _Optional[int] = ..., os_policy: _Optional[_Union[OsPolicy, _Mapping]] = ..., persistence: _Optional[_Union[Persistence, str]] = ..., profile: _Optional[str] = ...) -> None: ...

class Feed(_message.Message):
    __slots__ = ("code", "inputs", "values", "skip_type_check", "cwd")
    CODE_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    SKIP_TYPE_CHECK_FIELD_NUMBER: _ClassVar[int]
    CWD_FIELD_NUMBER: _ClassVar[int]
    code: str
    inputs: _containers.RepeatedCompositeFieldContainer[NamedRef]
    values: Arena
    skip_type_check: bool
    cwd: str
    def __init__(self, code: _Optional[str] = ..., inputs: _Optional[_Iterable[_Union[NamedRef, _Mapping]]] = ..., values: _Optional[_Union[Arena, _Mapping]] = ..., skip_type_check: _Optional[bool] = ..., cwd: _Optional[str] = ...) -> None: ...

class AbortFeed(_message.Message):
    __slots__ = ("exception",)
    EXCEPTION_FIELD_NUMBER: _ClassVar[int]
    exception: RaisedException
    def __init__(self, exception: _Optional[_Union[RaisedException, _Mapping]] = ...) -> None: ...

class ResumeCall(_message.Message):
    __slots__ = ("call_id", "result", "values")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    call_id: int
    result: ExtFunctionResult
    values: Arena
    def __init__(self, call_id: _Optional[int] = ..., result: _Optional[_Union[ExtFunctionResult, _Mapping]] = ..., values: _Optional[_Union[Arena, _Mapping]] = ...) -> None: ...

class ResumeNameLookup(_message.Message):
    __slots__ = ("values", "value", "undefined", "error")
    VALUES_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    UNDEFINED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    values: Arena
    value: int
    undefined: Unit
    error: RaisedException
    def __init__(self, values: _Optional[_Union[Arena, _Mapping]] = ..., value: _Optional[int] = ..., undefined: _Optional[_Union[Unit, _Mapping]] = ..., error: _Optional[_Union[RaisedException, _Mapping]] = ...) -> None: ...

class ResumeFutures(_message.Message):
    __slots__ = ("results", "values")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[FutureResult]
    values: Arena
    def __init__(self, results: _Optional[_Iterable[_Union[FutureResult, _Mapping]]] = ..., values: _Optional[_Union[Arena, _Mapping]] = ...) -> None: ...

class Dump(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Load(_message.Message):
    __slots__ = ("state",)
    STATE_FIELD_NUMBER: _ClassVar[int]
    state: bytes
    def __init__(self, state: _Optional[bytes] = ...) -> None: ...

class Reset(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Shutdown(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class InstallDependencies(_message.Message):
    __slots__ = ("requirements",)
    REQUIREMENTS_FIELD_NUMBER: _ClassVar[int]
    requirements: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, requirements: _Optional[_Iterable[str]] = ...) -> None: ...

class ChildEvent(_message.Message):
    __slots__ = ("print", "function_call", "os_call", "name_lookup", "resolve_futures", "complete", "error", "typing_error", "dump_result", "ok", "fatal_error", "shutdown", "total_execution_micros", "max_suspensions", "feed_execution_micros", "max_feed_duration_micros", "max_turn_duration_micros", "max_total_sleep_micros", "restored_script_name", "session_id")
    PRINT_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_CALL_FIELD_NUMBER: _ClassVar[int]
    OS_CALL_FIELD_NUMBER: _ClassVar[int]
    NAME_LOOKUP_FIELD_NUMBER: _ClassVar[int]
    RESOLVE_FUTURES_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TYPING_ERROR_FIELD_NUMBER: _ClassVar[int]
    DUMP_RESULT_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    FATAL_ERROR_FIELD_NUMBER: _ClassVar[int]
    SHUTDOWN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_EXECUTION_MICROS_FIELD_NUMBER: _ClassVar[int]
    MAX_SUSPENSIONS_FIELD_NUMBER: _ClassVar[int]
    FEED_EXECUTION_MICROS_FIELD_NUMBER: _ClassVar[int]
    MAX_FEED_DURATION_MICROS_FIELD_NUMBER: _ClassVar[int]
    MAX_TURN_DURATION_MICROS_FIELD_NUMBER: _ClassVar[int]
    MAX_TOTAL_SLEEP_MICROS_FIELD_NUMBER: _ClassVar[int]
    RESTORED_SCRIPT_NAME_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    print: Print
    function_call: FunctionCall
    os_call: OsCall
    name_lookup: NameLookup
    resolve_futures: ResolveFutures
    complete: Complete
    error: Error
    typing_error: TypingError
    dump_result: DumpResult
    ok: Ok
    fatal_error: FatalError
    shutdown: ShutdownDump
    total_execution_micros: int
    max_suspensions: int
    feed_execution_micros: int
    max_feed_duration_micros: int
    max_turn_duration_micros: int
    max_total_sleep_micros: int
    restored_script_name: str
    session_id: bytes
    def __init__(self, print: _Optional[_Union[Print, _Mapping]] = ..., function_call: _Optional[_Union[FunctionCall, _Mapping]] = ..., os_call: _Optional[_Union[OsCall, _Mapping]] = ..., name_lookup: _Optional[_Union[NameLookup, _Mapping]] = ..., resolve_futures: _Optional[_Union[ResolveFutures, _Mapping]] = ..., complete: _Optional[_Union[Complete, _Mapping]] = ..., error: _Optional[_Union[Error, _Mapping]] = ..., typing_error: _Optional[_Union[TypingError, _Mapping]] = ..., dump_result: _Optional[_Union[DumpResult, _Mapping]] = ..., ok: _Optional[_Union[Ok, _Mapping]] = ..., fatal_error: _Optional[_Union[FatalError, _Mapping]] = ..., shutdown: _Optional[_Union[ShutdownDump, _Mapping]] = ..., total_execution_micros: _Optional[int] = ..., max_suspensions: _Optional[int] = ..., feed_execution_micros: _Optional[int] = ..., max_feed_duration_micros: _Optional[int] = ..., max_turn_duration_micros: _Optional[int] = ..., max_total_sleep_micros: _Optional[int] = ..., restored_script_name: _Optional[str] = ..., session_id: _Optional[bytes] = ...) -> None: ...

class PrintSegment(_message.Message):
    __slots__ = ("stream", "text")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    stream: PrintStream
    text: str
    def __init__(self, stream: _Optional[_Union[PrintStream, str]] = ..., text: _Optional[str] = ...) -> None: ...

class Print(_message.Message):
    __slots__ = ("segments",)
    SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    segments: _containers.RepeatedCompositeFieldContainer[PrintSegment]
    def __init__(self, segments: _Optional[_Iterable[_Union[PrintSegment, _Mapping]]] = ...) -> None: ...

class FunctionCall(_message.Message):
    __slots__ = ("function_name", "args", "kwargs", "call_id", "object_id", "allow_eager_await", "values", "position")
    FUNCTION_NAME_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    KWARGS_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_ID_FIELD_NUMBER: _ClassVar[int]
    ALLOW_EAGER_AWAIT_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    function_name: str
    args: _containers.RepeatedScalarFieldContainer[int]
    kwargs: _containers.RepeatedCompositeFieldContainer[NodePair]
    call_id: int
    object_id: Uuid
    allow_eager_await: bool
    values: Arena
    position: SourceRange
    def __init__(self, function_name: _Optional[str] = ..., args: _Optional[_Iterable[int]] = ..., kwargs: _Optional[_Iterable[_Union[NodePair, _Mapping]]] = ..., call_id: _Optional[int] = ..., object_id: _Optional[_Union[Uuid, _Mapping]] = ..., allow_eager_await: _Optional[bool] = ..., values: _Optional[_Union[Arena, _Mapping]] = ..., position: _Optional[_Union[SourceRange, _Mapping]] = ...) -> None: ...

class OsCall(_message.Message):
    __slots__ = ("call_id", "exists", "is_file", "is_dir", "is_symlink", "read_text", "read_bytes", "stat", "iterdir", "resolve", "absolute", "unlink", "rmdir", "write_text", "append_text", "write_bytes", "append_bytes", "open", "mkdir", "rename", "getenv", "get_environ", "date_today", "date_time_now", "urandom", "time", "sleep", "async_sleep", "system_sleep", "async_system_sleep", "import_stubs", "scan", "values", "allow_eager_await", "position")
    class TextWrite(_message.Message):
        __slots__ = ("path", "data")
        PATH_FIELD_NUMBER: _ClassVar[int]
        DATA_FIELD_NUMBER: _ClassVar[int]
        path: str
        data: str
        def __init__(self, path: _Optional[str] = ..., data: _Optional[str] = ...) -> None: ...
    class BytesWrite(_message.Message):
        __slots__ = ("path", "data")
        PATH_FIELD_NUMBER: _ClassVar[int]
        DATA_FIELD_NUMBER: _ClassVar[int]
        path: str
        data: bytes
        def __init__(self, path: _Optional[str] = ..., data: _Optional[bytes] = ...) -> None: ...
    class Open(_message.Message):
        __slots__ = ("path", "mode")
        PATH_FIELD_NUMBER: _ClassVar[int]
        MODE_FIELD_NUMBER: _ClassVar[int]
        path: str
        mode: str
        def __init__(self, path: _Optional[str] = ..., mode: _Optional[str] = ...) -> None: ...
    class Mkdir(_message.Message):
        __slots__ = ("path", "parents", "exist_ok")
        PATH_FIELD_NUMBER: _ClassVar[int]
        PARENTS_FIELD_NUMBER: _ClassVar[int]
        EXIST_OK_FIELD_NUMBER: _ClassVar[int]
        path: str
        parents: bool
        exist_ok: bool
        def __init__(self, path: _Optional[str] = ..., parents: _Optional[bool] = ..., exist_ok: _Optional[bool] = ...) -> None: ...
    class Rename(_message.Message):
        __slots__ = ("src", "dst")
        SRC_FIELD_NUMBER: _ClassVar[int]
        DST_FIELD_NUMBER: _ClassVar[int]
        src: str
        dst: str
        def __init__(self, src: _Optional[str] = ..., dst: _Optional[str] = ...) -> None: ...
    class Getenv(_message.Message):
        __slots__ = ("key", "default")
        KEY_FIELD_NUMBER: _ClassVar[int]
        DEFAULT_FIELD_NUMBER: _ClassVar[int]
        key: str
        default: int
        def __init__(self, key: _Optional[str] = ..., default: _Optional[int] = ...) -> None: ...
    class TimeCall(_message.Message):
        __slots__ = ("caller",)
        CALLER_FIELD_NUMBER: _ClassVar[int]
        caller: str
        def __init__(self, caller: _Optional[str] = ...) -> None: ...
    class DateTimeNow(_message.Message):
        __slots__ = ("tz",)
        TZ_FIELD_NUMBER: _ClassVar[int]
        tz: TimeZone
        def __init__(self, tz: _Optional[_Union[TimeZone, _Mapping]] = ...) -> None: ...
    class Urandom(_message.Message):
        __slots__ = ("size",)
        SIZE_FIELD_NUMBER: _ClassVar[int]
        size: int
        def __init__(self, size: _Optional[int] = ...) -> None: ...
    class Sleep(_message.Message):
        __slots__ = ("seconds",)
        SECONDS_FIELD_NUMBER: _ClassVar[int]
        seconds: float
        def __init__(self, seconds: _Optional[float] = ...) -> None: ...
    class AsyncSleep(_message.Message):
        __slots__ = ("delay",)
        DELAY_FIELD_NUMBER: _ClassVar[int]
        delay: float
        def __init__(self, delay: _Optional[float] = ...) -> None: ...
    class Scan(_message.Message):
        __slots__ = ("path", "max_depth", "follow_symlinks", "pattern", "case_sensitive", "recurse_symlinks")
        PATH_FIELD_NUMBER: _ClassVar[int]
        MAX_DEPTH_FIELD_NUMBER: _ClassVar[int]
        FOLLOW_SYMLINKS_FIELD_NUMBER: _ClassVar[int]
        PATTERN_FIELD_NUMBER: _ClassVar[int]
        CASE_SENSITIVE_FIELD_NUMBER: _ClassVar[int]
        RECURSE_SYMLINKS_FIELD_NUMBER: _ClassVar[int]
        path: str
        max_depth: int
        follow_symlinks: bool
        pattern: _containers.RepeatedScalarFieldContainer[str]
        case_sensitive: bool
        recurse_symlinks: bool
        def __init__(self, path: _Optional[str] = ..., max_depth: _Optional[int] = ..., follow_symlinks: _Optional[bool] = ..., pattern: _Optional[_Iterable[str]] = ..., case_sensitive: _Optional[bool] = ..., recurse_symlinks: _Optional[bool] = ...) -> None: ...
    class Import(_message.Message):
        __slots__ = ("module",)
        MODULE_FIELD_NUMBER: _ClassVar[int]
        module: str
        def __init__(self, module: _Optional[str] = ...) -> None: ...
    class ImportStubs(_message.Message):
        __slots__ = ("modules",)
        MODULES_FIELD_NUMBER: _ClassVar[int]
        modules: _containers.RepeatedScalarFieldContainer[str]
        def __init__(self, modules: _Optional[_Iterable[str]] = ...) -> None: ...
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    EXISTS_FIELD_NUMBER: _ClassVar[int]
    IS_FILE_FIELD_NUMBER: _ClassVar[int]
    IS_DIR_FIELD_NUMBER: _ClassVar[int]
    IS_SYMLINK_FIELD_NUMBER: _ClassVar[int]
    READ_TEXT_FIELD_NUMBER: _ClassVar[int]
    READ_BYTES_FIELD_NUMBER: _ClassVar[int]
    STAT_FIELD_NUMBER: _ClassVar[int]
    ITERDIR_FIELD_NUMBER: _ClassVar[int]
    RESOLVE_FIELD_NUMBER: _ClassVar[int]
    ABSOLUTE_FIELD_NUMBER: _ClassVar[int]
    UNLINK_FIELD_NUMBER: _ClassVar[int]
    RMDIR_FIELD_NUMBER: _ClassVar[int]
    WRITE_TEXT_FIELD_NUMBER: _ClassVar[int]
    APPEND_TEXT_FIELD_NUMBER: _ClassVar[int]
    WRITE_BYTES_FIELD_NUMBER: _ClassVar[int]
    APPEND_BYTES_FIELD_NUMBER: _ClassVar[int]
    OPEN_FIELD_NUMBER: _ClassVar[int]
    MKDIR_FIELD_NUMBER: _ClassVar[int]
    RENAME_FIELD_NUMBER: _ClassVar[int]
    GETENV_FIELD_NUMBER: _ClassVar[int]
    GET_ENVIRON_FIELD_NUMBER: _ClassVar[int]
    DATE_TODAY_FIELD_NUMBER: _ClassVar[int]
    DATE_TIME_NOW_FIELD_NUMBER: _ClassVar[int]
    URANDOM_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    SLEEP_FIELD_NUMBER: _ClassVar[int]
    ASYNC_SLEEP_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_SLEEP_FIELD_NUMBER: _ClassVar[int]
    ASYNC_SYSTEM_SLEEP_FIELD_NUMBER: _ClassVar[int]
    IMPORT_FIELD_NUMBER: _ClassVar[int]
    IMPORT_STUBS_FIELD_NUMBER: _ClassVar[int]
    SCAN_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    ALLOW_EAGER_AWAIT_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    call_id: int
    exists: str
    is_file: str
    is_dir: str
    is_symlink: str
    read_text: str
    read_bytes: str
    stat: str
    iterdir: str
    resolve: str
    absolute: str
    unlink: str
    rmdir: str
    write_text: OsCall.TextWrite
    append_text: OsCall.TextWrite
    write_bytes: OsCall.BytesWrite
    append_bytes: OsCall.BytesWrite
    open: OsCall.Open
    mkdir: OsCall.Mkdir
    rename: OsCall.Rename
    getenv: OsCall.Getenv
    get_environ: Unit
    date_today: Unit
    date_time_now: OsCall.DateTimeNow
    urandom: OsCall.Urandom
    time: OsCall.TimeCall
    sleep: OsCall.Sleep
    async_sleep: OsCall.AsyncSleep
    system_sleep: OsCall.Sleep
    async_system_sleep: OsCall.AsyncSleep
    import_stubs: OsCall.ImportStubs
    scan: OsCall.Scan
    values: Arena
    allow_eager_await: bool
    position: SourceRange
    def __init__(self, call_id: _Optional[int] = ..., exists: _Optional[str] = ..., is_file: _Optional[str] = ..., is_dir: _Optional[str] = ..., is_symlink: _Optional[str] = ..., read_text: _Optional[str] = ..., read_bytes: _Optional[str] = ..., stat: _Optional[str] = ..., iterdir: _Optional[str] = ..., resolve: _Optional[str] = ..., absolute: _Optional[str] = ..., unlink: _Optional[str] = ..., rmdir: _Optional[str] = ..., write_text: _Optional[_Union[OsCall.TextWrite, _Mapping]] = ..., append_text: _Optional[_Union[OsCall.TextWrite, _Mapping]] = ..., write_bytes: _Optional[_Union[OsCall.BytesWrite, _Mapping]] = ..., append_bytes: _Optional[_Union[OsCall.BytesWrite, _Mapping]] = ..., open: _Optional[_Union[OsCall.Open, _Mapping]] = ..., mkdir: _Optional[_Union[OsCall.Mkdir, _Mapping]] = ..., rename: _Optional[_Union[OsCall.Rename, _Mapping]] = ..., getenv: _Optional[_Union[OsCall.Getenv, _Mapping]] = ..., get_environ: _Optional[_Union[Unit, _Mapping]] = ..., date_today: _Optional[_Union[Unit, _Mapping]] = ..., date_time_now: _Optional[_Union[OsCall.DateTimeNow, _Mapping]] = ..., urandom: _Optional[_Union[OsCall.Urandom, _Mapping]] = ..., time: _Optional[_Union[OsCall.TimeCall, _Mapping]] = ..., sleep: _Optional[_Union[OsCall.Sleep, _Mapping]] = ..., async_sleep: _Optional[_Union[OsCall.AsyncSleep, _Mapping]] = ..., system_sleep: _Optional[_Union[OsCall.Sleep, _Mapping]] = ..., async_system_sleep: _Optional[_Union[OsCall.AsyncSleep, _Mapping]] = ..., import_stubs: _Optional[_Union[OsCall.ImportStubs, _Mapping]] = ..., scan: _Optional[_Union[OsCall.Scan, _Mapping]] = ..., values: _Optional[_Union[Arena, _Mapping]] = ..., allow_eager_await: _Optional[bool] = ..., position: _Optional[_Union[SourceRange, _Mapping]] = ..., **kwargs) -> None: ...

class NameLookup(_message.Message):
    __slots__ = ("name", "object_id", "position")
    NAME_FIELD_NUMBER: _ClassVar[int]
    OBJECT_ID_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    name: str
    object_id: Uuid
    position: SourceRange
    def __init__(self, name: _Optional[str] = ..., object_id: _Optional[_Union[Uuid, _Mapping]] = ..., position: _Optional[_Union[SourceRange, _Mapping]] = ...) -> None: ...

class ResolveFutures(_message.Message):
    __slots__ = ("pending_call_ids", "position")
    PENDING_CALL_IDS_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    pending_call_ids: _containers.RepeatedScalarFieldContainer[int]
    position: SourceRange
    def __init__(self, pending_call_ids: _Optional[_Iterable[int]] = ..., position: _Optional[_Union[SourceRange, _Mapping]] = ...) -> None: ...

class Complete(_message.Message):
    __slots__ = ("value", "values")
    VALUE_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    value: int
    values: Arena
    def __init__(self, value: _Optional[int] = ..., values: _Optional[_Union[Arena, _Mapping]] = ...) -> None: ...

class Error(_message.Message):
    __slots__ = ("exception",)
    EXCEPTION_FIELD_NUMBER: _ClassVar[int]
    exception: RaisedException
    def __init__(self, exception: _Optional[_Union[RaisedException, _Mapping]] = ...) -> None: ...

class TypingError(_message.Message):
    __slots__ = ("diagnostics",)
    DIAGNOSTICS_FIELD_NUMBER: _ClassVar[int]
    diagnostics: str
    def __init__(self, diagnostics: _Optional[str] = ...) -> None: ...

class DumpResult(_message.Message):
    __slots__ = ("state",)
    STATE_FIELD_NUMBER: _ClassVar[int]
    state: bytes
    def __init__(self, state: _Optional[bytes] = ...) -> None: ...

class Ok(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class FatalError(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class ShutdownDump(_message.Message):
    __slots__ = ("dump",)
    DUMP_FIELD_NUMBER: _ClassVar[int]
    dump: bytes
    def __init__(self, dump: _Optional[bytes] = ...) -> None: ...
