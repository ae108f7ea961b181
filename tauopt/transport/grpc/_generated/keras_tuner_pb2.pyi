from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Sampling(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NONE: _ClassVar[Sampling]
    LINEAR: _ClassVar[Sampling]
    LOG: _ClassVar[Sampling]
    REVERSE_LOG: _ClassVar[Sampling]

class TrialStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    UNKNOWN: _ClassVar[TrialStatus]
    RUNNING: _ClassVar[TrialStatus]
    IDLE: _ClassVar[TrialStatus]
    INVALID: _ClassVar[TrialStatus]
    STOPPED: _ClassVar[TrialStatus]
    COMPLETED: _ClassVar[TrialStatus]
    FAILED: _ClassVar[TrialStatus]
NONE: Sampling
LINEAR: Sampling
LOG: Sampling
REVERSE_LOG: Sampling
UNKNOWN: TrialStatus
RUNNING: TrialStatus
IDLE: TrialStatus
INVALID: TrialStatus
STOPPED: TrialStatus
COMPLETED: TrialStatus
FAILED: TrialStatus

class Value(_message.Message):
    __slots__ = ("int_value", "float_value", "string_value", "boolean_value")
    INT_VALUE_FIELD_NUMBER: _ClassVar[int]
    FLOAT_VALUE_FIELD_NUMBER: _ClassVar[int]
    STRING_VALUE_FIELD_NUMBER: _ClassVar[int]
    BOOLEAN_VALUE_FIELD_NUMBER: _ClassVar[int]
    int_value: int
    float_value: float
    string_value: str
    boolean_value: bool
    def __init__(self, int_value: _Optional[int] = ..., float_value: _Optional[float] = ..., string_value: _Optional[str] = ..., boolean_value: _Optional[bool] = ...) -> None: ...

class Float(_message.Message):
    __slots__ = ("name", "min_value", "max_value", "step", "sampling", "default", "conditions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MIN_VALUE_FIELD_NUMBER: _ClassVar[int]
    MAX_VALUE_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_FIELD_NUMBER: _ClassVar[int]
    CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    min_value: float
    max_value: float
    step: float
    sampling: Sampling
    default: float
    conditions: _containers.RepeatedCompositeFieldContainer[Condition]
    def __init__(self, name: _Optional[str] = ..., min_value: _Optional[float] = ..., max_value: _Optional[float] = ..., step: _Optional[float] = ..., sampling: _Optional[_Union[Sampling, str]] = ..., default: _Optional[float] = ..., conditions: _Optional[_Iterable[_Union[Condition, _Mapping]]] = ...) -> None: ...

class Int(_message.Message):
    __slots__ = ("name", "min_value", "max_value", "step", "sampling", "default", "conditions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MIN_VALUE_FIELD_NUMBER: _ClassVar[int]
    MAX_VALUE_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_FIELD_NUMBER: _ClassVar[int]
    CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    min_value: int
    max_value: int
    step: int
    sampling: Sampling
    default: int
    conditions: _containers.RepeatedCompositeFieldContainer[Condition]
    def __init__(self, name: _Optional[str] = ..., min_value: _Optional[int] = ..., max_value: _Optional[int] = ..., step: _Optional[int] = ..., sampling: _Optional[_Union[Sampling, str]] = ..., default: _Optional[int] = ..., conditions: _Optional[_Iterable[_Union[Condition, _Mapping]]] = ...) -> None: ...

class Choice(_message.Message):
    __slots__ = ("name", "values", "default", "ordered", "conditions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_FIELD_NUMBER: _ClassVar[int]
    ORDERED_FIELD_NUMBER: _ClassVar[int]
    CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    values: _containers.RepeatedCompositeFieldContainer[Value]
    default: Value
    ordered: bool
    conditions: _containers.RepeatedCompositeFieldContainer[Condition]
    def __init__(self, name: _Optional[str] = ..., values: _Optional[_Iterable[_Union[Value, _Mapping]]] = ..., default: _Optional[_Union[Value, _Mapping]] = ..., ordered: _Optional[bool] = ..., conditions: _Optional[_Iterable[_Union[Condition, _Mapping]]] = ...) -> None: ...

class Boolean(_message.Message):
    __slots__ = ("name", "default", "conditions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_FIELD_NUMBER: _ClassVar[int]
    CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    default: bool
    conditions: _containers.RepeatedCompositeFieldContainer[Condition]
    def __init__(self, name: _Optional[str] = ..., default: _Optional[bool] = ..., conditions: _Optional[_Iterable[_Union[Condition, _Mapping]]] = ...) -> None: ...

class Fixed(_message.Message):
    __slots__ = ("name", "value", "conditions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: Value
    conditions: _containers.RepeatedCompositeFieldContainer[Condition]
    def __init__(self, name: _Optional[str] = ..., value: _Optional[_Union[Value, _Mapping]] = ..., conditions: _Optional[_Iterable[_Union[Condition, _Mapping]]] = ...) -> None: ...

class HyperParameters(_message.Message):
    __slots__ = ("space", "values")
    class Space(_message.Message):
        __slots__ = ("float_space", "int_space", "choice_space", "boolean_space", "fixed_space")
        FLOAT_SPACE_FIELD_NUMBER: _ClassVar[int]
        INT_SPACE_FIELD_NUMBER: _ClassVar[int]
        CHOICE_SPACE_FIELD_NUMBER: _ClassVar[int]
        BOOLEAN_SPACE_FIELD_NUMBER: _ClassVar[int]
        FIXED_SPACE_FIELD_NUMBER: _ClassVar[int]
        float_space: _containers.RepeatedCompositeFieldContainer[Float]
        int_space: _containers.RepeatedCompositeFieldContainer[Int]
        choice_space: _containers.RepeatedCompositeFieldContainer[Choice]
        boolean_space: _containers.RepeatedCompositeFieldContainer[Boolean]
        fixed_space: _containers.RepeatedCompositeFieldContainer[Fixed]
        def __init__(self, float_space: _Optional[_Iterable[_Union[Float, _Mapping]]] = ..., int_space: _Optional[_Iterable[_Union[Int, _Mapping]]] = ..., choice_space: _Optional[_Iterable[_Union[Choice, _Mapping]]] = ..., boolean_space: _Optional[_Iterable[_Union[Boolean, _Mapping]]] = ..., fixed_space: _Optional[_Iterable[_Union[Fixed, _Mapping]]] = ...) -> None: ...
    class Values(_message.Message):
        __slots__ = ("values",)
        class ValuesEntry(_message.Message):
            __slots__ = ("key", "value")
            KEY_FIELD_NUMBER: _ClassVar[int]
            VALUE_FIELD_NUMBER: _ClassVar[int]
            key: str
            value: Value
            def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Value, _Mapping]] = ...) -> None: ...
        VALUES_FIELD_NUMBER: _ClassVar[int]
        values: _containers.MessageMap[str, Value]
        def __init__(self, values: _Optional[_Mapping[str, Value]] = ...) -> None: ...
    SPACE_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    space: HyperParameters.Space
    values: HyperParameters.Values
    def __init__(self, space: _Optional[_Union[HyperParameters.Space, _Mapping]] = ..., values: _Optional[_Union[HyperParameters.Values, _Mapping]] = ...) -> None: ...

class MetricObservation(_message.Message):
    __slots__ = ("value", "step")
    VALUE_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    value: _containers.RepeatedScalarFieldContainer[float]
    step: int
    def __init__(self, value: _Optional[_Iterable[float]] = ..., step: _Optional[int] = ...) -> None: ...

class MetricHistory(_message.Message):
    __slots__ = ("observations", "maximize")
    OBSERVATIONS_FIELD_NUMBER: _ClassVar[int]
    MAXIMIZE_FIELD_NUMBER: _ClassVar[int]
    observations: _containers.RepeatedCompositeFieldContainer[MetricObservation]
    maximize: bool
    def __init__(self, observations: _Optional[_Iterable[_Union[MetricObservation, _Mapping]]] = ..., maximize: _Optional[bool] = ...) -> None: ...

class MetricsTracker(_message.Message):
    __slots__ = ("metrics",)
    class MetricsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: MetricHistory
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[MetricHistory, _Mapping]] = ...) -> None: ...
    METRICS_FIELD_NUMBER: _ClassVar[int]
    metrics: _containers.MessageMap[str, MetricHistory]
    def __init__(self, metrics: _Optional[_Mapping[str, MetricHistory]] = ...) -> None: ...

class Trial(_message.Message):
    __slots__ = ("hyperparameters", "trial_id", "status", "metrics", "score")
    class Score(_message.Message):
        __slots__ = ("value", "step")
        VALUE_FIELD_NUMBER: _ClassVar[int]
        STEP_FIELD_NUMBER: _ClassVar[int]
        value: float
        step: int
        def __init__(self, value: _Optional[float] = ..., step: _Optional[int] = ...) -> None: ...
    HYPERPARAMETERS_FIELD_NUMBER: _ClassVar[int]
    TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    hyperparameters: HyperParameters
    trial_id: str
    status: TrialStatus
    metrics: MetricsTracker
    score: Trial.Score
    def __init__(self, hyperparameters: _Optional[_Union[HyperParameters, _Mapping]] = ..., trial_id: _Optional[str] = ..., status: _Optional[_Union[TrialStatus, str]] = ..., metrics: _Optional[_Union[MetricsTracker, _Mapping]] = ..., score: _Optional[_Union[Trial.Score, _Mapping]] = ...) -> None: ...

class Condition(_message.Message):
    __slots__ = ("parent",)
    class Parent(_message.Message):
        __slots__ = ("name", "values")
        NAME_FIELD_NUMBER: _ClassVar[int]
        VALUES_FIELD_NUMBER: _ClassVar[int]
        name: str
        values: _containers.RepeatedCompositeFieldContainer[Value]
        def __init__(self, name: _Optional[str] = ..., values: _Optional[_Iterable[_Union[Value, _Mapping]]] = ...) -> None: ...
    PARENT_FIELD_NUMBER: _ClassVar[int]
    parent: Condition.Parent
    def __init__(self, parent: _Optional[_Union[Condition.Parent, _Mapping]] = ...) -> None: ...
