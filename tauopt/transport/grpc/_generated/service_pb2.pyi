from tauopt.transport.grpc._generated import keras_tuner_pb2 as _keras_tuner_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetSpaceRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetSpaceResponse(_message.Message):
    __slots__ = ("hyperparameters",)
    HYPERPARAMETERS_FIELD_NUMBER: _ClassVar[int]
    hyperparameters: _keras_tuner_pb2.HyperParameters
    def __init__(self, hyperparameters: _Optional[_Union[_keras_tuner_pb2.HyperParameters, _Mapping]] = ...) -> None: ...

class UpdateSpaceRequest(_message.Message):
    __slots__ = ("hyperparameters",)
    HYPERPARAMETERS_FIELD_NUMBER: _ClassVar[int]
    hyperparameters: _keras_tuner_pb2.HyperParameters
    def __init__(self, hyperparameters: _Optional[_Union[_keras_tuner_pb2.HyperParameters, _Mapping]] = ...) -> None: ...

class UpdateSpaceResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CreateTrialRequest(_message.Message):
    __slots__ = ("tuner_id",)
    TUNER_ID_FIELD_NUMBER: _ClassVar[int]
    tuner_id: str
    def __init__(self, tuner_id: _Optional[str] = ...) -> None: ...

class CreateTrialResponse(_message.Message):
    __slots__ = ("trial",)
    TRIAL_FIELD_NUMBER: _ClassVar[int]
    trial: _keras_tuner_pb2.Trial
    def __init__(self, trial: _Optional[_Union[_keras_tuner_pb2.Trial, _Mapping]] = ...) -> None: ...

class UpdateTrialRequest(_message.Message):
    __slots__ = ("trial_id", "metrics", "step")
    class MetricsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    trial_id: str
    metrics: _containers.ScalarMap[str, float]
    step: int
    def __init__(self, trial_id: _Optional[str] = ..., metrics: _Optional[_Mapping[str, float]] = ..., step: _Optional[int] = ...) -> None: ...

class UpdateTrialResponse(_message.Message):
    __slots__ = ("trial",)
    TRIAL_FIELD_NUMBER: _ClassVar[int]
    trial: _keras_tuner_pb2.Trial
    def __init__(self, trial: _Optional[_Union[_keras_tuner_pb2.Trial, _Mapping]] = ...) -> None: ...

class EndTrialRequest(_message.Message):
    __slots__ = ("trial",)
    TRIAL_FIELD_NUMBER: _ClassVar[int]
    trial: _keras_tuner_pb2.Trial
    def __init__(self, trial: _Optional[_Union[_keras_tuner_pb2.Trial, _Mapping]] = ...) -> None: ...

class EndTrialResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetBestTrialsRequest(_message.Message):
    __slots__ = ("num_trials",)
    NUM_TRIALS_FIELD_NUMBER: _ClassVar[int]
    num_trials: int
    def __init__(self, num_trials: _Optional[int] = ...) -> None: ...

class GetBestTrialsResponse(_message.Message):
    __slots__ = ("trials",)
    TRIALS_FIELD_NUMBER: _ClassVar[int]
    trials: _containers.RepeatedCompositeFieldContainer[_keras_tuner_pb2.Trial]
    def __init__(self, trials: _Optional[_Iterable[_Union[_keras_tuner_pb2.Trial, _Mapping]]] = ...) -> None: ...

class GetTrialRequest(_message.Message):
    __slots__ = ("trial_id",)
    TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    trial_id: str
    def __init__(self, trial_id: _Optional[str] = ...) -> None: ...

class GetTrialResponse(_message.Message):
    __slots__ = ("trial",)
    TRIAL_FIELD_NUMBER: _ClassVar[int]
    trial: _keras_tuner_pb2.Trial
    def __init__(self, trial: _Optional[_Union[_keras_tuner_pb2.Trial, _Mapping]] = ...) -> None: ...
