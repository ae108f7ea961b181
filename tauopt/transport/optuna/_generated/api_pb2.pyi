from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class StudyDirection(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MINIMIZE: _ClassVar[StudyDirection]
    MAXIMIZE: _ClassVar[StudyDirection]

class TrialState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RUNNING: _ClassVar[TrialState]
    COMPLETE: _ClassVar[TrialState]
    PRUNED: _ClassVar[TrialState]
    FAIL: _ClassVar[TrialState]
    WAITING: _ClassVar[TrialState]
MINIMIZE: StudyDirection
MAXIMIZE: StudyDirection
RUNNING: TrialState
COMPLETE: TrialState
PRUNED: TrialState
FAIL: TrialState
WAITING: TrialState

class CreateNewStudyRequest(_message.Message):
    __slots__ = ("directions", "study_name")
    DIRECTIONS_FIELD_NUMBER: _ClassVar[int]
    STUDY_NAME_FIELD_NUMBER: _ClassVar[int]
    directions: _containers.RepeatedScalarFieldContainer[StudyDirection]
    study_name: str
    def __init__(self, directions: _Optional[_Iterable[_Union[StudyDirection, str]]] = ..., study_name: _Optional[str] = ...) -> None: ...

class CreateNewStudyReply(_message.Message):
    __slots__ = ("study_id",)
    STUDY_ID_FIELD_NUMBER: _ClassVar[int]
    study_id: int
    def __init__(self, study_id: _Optional[int] = ...) -> None: ...

class DeleteStudyRequest(_message.Message):
    __slots__ = ("study_id",)
    STUDY_ID_FIELD_NUMBER: _ClassVar[int]
    study_id: int
    def __init__(self, study_id: _Optional[int] = ...) -> None: ...

class DeleteStudyReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SetStudyUserAttributeRequest(_message.Message):
    __slots__ = ("study_id", "key", "value")
    STUDY_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    study_id: int
    key: str
    value: str
    def __init__(self, study_id: _Optional[int] = ..., key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class SetStudyUserAttributeReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SetStudySystemAttributeRequest(_message.Message):
    __slots__ = ("study_id", "key", "value")
    STUDY_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    study_id: int
    key: str
    value: str
    def __init__(self, study_id: _Optional[int] = ..., key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class SetStudySystemAttributeReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetStudyIdFromNameRequest(_message.Message):
    __slots__ = ("study_name",)
    STUDY_NAME_FIELD_NUMBER: _ClassVar[int]
    study_name: str
    def __init__(self, study_name: _Optional[str] = ...) -> None: ...

class GetStudyIdFromNameReply(_message.Message):
    __slots__ = ("study_id",)
    STUDY_ID_FIELD_NUMBER: _ClassVar[int]
    study_id: int
    def __init__(self, study_id: _Optional[int] = ...) -> None: ...

class GetStudyNameFromIdRequest(_message.Message):
    __slots__ = ("study_id",)
    STUDY_ID_FIELD_NUMBER: _ClassVar[int]
    study_id: int
    def __init__(self, study_id: _Optional[int] = ...) -> None: ...

class GetStudyNameFromIdReply(_message.Message):
    __slots__ = ("study_name",)
    STUDY_NAME_FIELD_NUMBER: _ClassVar[int]
    study_name: str
    def __init__(self, study_name: _Optional[str] = ...) -> None: ...

class GetStudyDirectionsRequest(_message.Message):
    __slots__ = ("study_id",)
    STUDY_ID_FIELD_NUMBER: _ClassVar[int]
    study_id: int
    def __init__(self, study_id: _Optional[int] = ...) -> None: ...

class GetStudyDirectionsReply(_message.Message):
    __slots__ = ("directions",)
    DIRECTIONS_FIELD_NUMBER: _ClassVar[int]
    directions: _containers.RepeatedScalarFieldContainer[StudyDirection]
    def __init__(self, directions: _Optional[_Iterable[_Union[StudyDirection, str]]] = ...) -> None: ...

class GetStudyUserAttributesRequest(_message.Message):
    __slots__ = ("study_id",)
    STUDY_ID_FIELD_NUMBER: _ClassVar[int]
    study_id: int
    def __init__(self, study_id: _Optional[int] = ...) -> None: ...

class GetStudyUserAttributesReply(_message.Message):
    __slots__ = ("user_attributes",)
    class UserAttributesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    USER_ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    user_attributes: _containers.ScalarMap[str, str]
    def __init__(self, user_attributes: _Optional[_Mapping[str, str]] = ...) -> None: ...

class GetStudySystemAttributesRequest(_message.Message):
    __slots__ = ("study_id",)
    STUDY_ID_FIELD_NUMBER: _ClassVar[int]
    study_id: int
    def __init__(self, study_id: _Optional[int] = ...) -> None: ...

class GetStudySystemAttributesReply(_message.Message):
    __slots__ = ("system_attributes",)
    class SystemAttributesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SYSTEM_ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    system_attributes: _containers.ScalarMap[str, str]
    def __init__(self, system_attributes: _Optional[_Mapping[str, str]] = ...) -> None: ...

class GetAllStudiesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetAllStudiesReply(_message.Message):
    __slots__ = ("studies",)
    STUDIES_FIELD_NUMBER: _ClassVar[int]
    studies: _containers.RepeatedCompositeFieldContainer[Study]
    def __init__(self, studies: _Optional[_Iterable[_Union[Study, _Mapping]]] = ...) -> None: ...

class CreateNewTrialRequest(_message.Message):
    __slots__ = ("study_id", "template_trial", "template_trial_is_none")
    STUDY_ID_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_TRIAL_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_TRIAL_IS_NONE_FIELD_NUMBER: _ClassVar[int]
    study_id: int
    template_trial: Trial
    template_trial_is_none: bool
    def __init__(self, study_id: _Optional[int] = ..., template_trial: _Optional[_Union[Trial, _Mapping]] = ..., template_trial_is_none: _Optional[bool] = ...) -> None: ...

class CreateNewTrialReply(_message.Message):
    __slots__ = ("trial_id",)
    TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    trial_id: int
    def __init__(self, trial_id: _Optional[int] = ...) -> None: ...

class SetTrialParameterRequest(_message.Message):
    __slots__ = ("trial_id", "param_name", "param_value_internal", "distribution")
    TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    PARAM_NAME_FIELD_NUMBER: _ClassVar[int]
    PARAM_VALUE_INTERNAL_FIELD_NUMBER: _ClassVar[int]
    DISTRIBUTION_FIELD_NUMBER: _ClassVar[int]
    trial_id: int
    param_name: str
    param_value_internal: float
    distribution: str
    def __init__(self, trial_id: _Optional[int] = ..., param_name: _Optional[str] = ..., param_value_internal: _Optional[float] = ..., distribution: _Optional[str] = ...) -> None: ...

class SetTrialParameterReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetTrialIdFromStudyIdTrialNumberRequest(_message.Message):
    __slots__ = ("study_id", "trial_number")
    STUDY_ID_FIELD_NUMBER: _ClassVar[int]
    TRIAL_NUMBER_FIELD_NUMBER: _ClassVar[int]
    study_id: int
    trial_number: int
    def __init__(self, study_id: _Optional[int] = ..., trial_number: _Optional[int] = ...) -> None: ...

class GetTrialIdFromStudyIdTrialNumberReply(_message.Message):
    __slots__ = ("trial_id",)
    TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    trial_id: int
    def __init__(self, trial_id: _Optional[int] = ...) -> None: ...

class SetTrialStateValuesRequest(_message.Message):
    __slots__ = ("trial_id", "state", "values")
    TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    trial_id: int
    state: TrialState
    values: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, trial_id: _Optional[int] = ..., state: _Optional[_Union[TrialState, str]] = ..., values: _Optional[_Iterable[float]] = ...) -> None: ...

class SetTrialStateValuesReply(_message.Message):
    __slots__ = ("trial_updated",)
    TRIAL_UPDATED_FIELD_NUMBER: _ClassVar[int]
    trial_updated: bool
    def __init__(self, trial_updated: _Optional[bool] = ...) -> None: ...

class SetTrialIntermediateValueRequest(_message.Message):
    __slots__ = ("trial_id", "step", "intermediate_value")
    TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    INTERMEDIATE_VALUE_FIELD_NUMBER: _ClassVar[int]
    trial_id: int
    step: int
    intermediate_value: float
    def __init__(self, trial_id: _Optional[int] = ..., step: _Optional[int] = ..., intermediate_value: _Optional[float] = ...) -> None: ...

class SetTrialIntermediateValueReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SetTrialUserAttributeRequest(_message.Message):
    __slots__ = ("trial_id", "key", "value")
    TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    trial_id: int
    key: str
    value: str
    def __init__(self, trial_id: _Optional[int] = ..., key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class SetTrialUserAttributeReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SetTrialSystemAttributeRequest(_message.Message):
    __slots__ = ("trial_id", "key", "value")
    TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    trial_id: int
    key: str
    value: str
    def __init__(self, trial_id: _Optional[int] = ..., key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class SetTrialSystemAttributeReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetTrialRequest(_message.Message):
    __slots__ = ("trial_id",)
    TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    trial_id: int
    def __init__(self, trial_id: _Optional[int] = ...) -> None: ...

class GetTrialReply(_message.Message):
    __slots__ = ("trial",)
    TRIAL_FIELD_NUMBER: _ClassVar[int]
    trial: Trial
    def __init__(self, trial: _Optional[_Union[Trial, _Mapping]] = ...) -> None: ...

class GetTrialsRequest(_message.Message):
    __slots__ = ("study_id", "included_trial_ids", "trial_id_greater_than")
    STUDY_ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDED_TRIAL_IDS_FIELD_NUMBER: _ClassVar[int]
    TRIAL_ID_GREATER_THAN_FIELD_NUMBER: _ClassVar[int]
    study_id: int
    included_trial_ids: _containers.RepeatedScalarFieldContainer[int]
    trial_id_greater_than: int
    def __init__(self, study_id: _Optional[int] = ..., included_trial_ids: _Optional[_Iterable[int]] = ..., trial_id_greater_than: _Optional[int] = ...) -> None: ...

class GetTrialsReply(_message.Message):
    __slots__ = ("trials",)
    TRIALS_FIELD_NUMBER: _ClassVar[int]
    trials: _containers.RepeatedCompositeFieldContainer[Trial]
    def __init__(self, trials: _Optional[_Iterable[_Union[Trial, _Mapping]]] = ...) -> None: ...

class Study(_message.Message):
    __slots__ = ("study_id", "study_name", "directions", "user_attributes", "system_attributes")
    class UserAttributesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class SystemAttributesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    STUDY_ID_FIELD_NUMBER: _ClassVar[int]
    STUDY_NAME_FIELD_NUMBER: _ClassVar[int]
    DIRECTIONS_FIELD_NUMBER: _ClassVar[int]
    USER_ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    study_id: int
    study_name: str
    directions: _containers.RepeatedScalarFieldContainer[StudyDirection]
    user_attributes: _containers.ScalarMap[str, str]
    system_attributes: _containers.ScalarMap[str, str]
    def __init__(self, study_id: _Optional[int] = ..., study_name: _Optional[str] = ..., directions: _Optional[_Iterable[_Union[StudyDirection, str]]] = ..., user_attributes: _Optional[_Mapping[str, str]] = ..., system_attributes: _Optional[_Mapping[str, str]] = ...) -> None: ...

class Trial(_message.Message):
    __slots__ = ("trial_id", "number", "state", "values", "datetime_start", "datetime_complete", "params", "distributions", "user_attributes", "system_attributes", "intermediate_values")
    class ParamsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class DistributionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class UserAttributesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class SystemAttributesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class IntermediateValuesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: float
        def __init__(self, key: _Optional[int] = ..., value: _Optional[float] = ...) -> None: ...
    TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    DATETIME_START_FIELD_NUMBER: _ClassVar[int]
    DATETIME_COMPLETE_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    DISTRIBUTIONS_FIELD_NUMBER: _ClassVar[int]
    USER_ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    INTERMEDIATE_VALUES_FIELD_NUMBER: _ClassVar[int]
    trial_id: int
    number: int
    state: TrialState
    values: _containers.RepeatedScalarFieldContainer[float]
    datetime_start: str
    datetime_complete: str
    params: _containers.ScalarMap[str, float]
    distributions: _containers.ScalarMap[str, str]
    user_attributes: _containers.ScalarMap[str, str]
    system_attributes: _containers.ScalarMap[str, str]
    intermediate_values: _containers.ScalarMap[int, float]
    def __init__(self, trial_id: _Optional[int] = ..., number: _Optional[int] = ..., state: _Optional[_Union[TrialState, str]] = ..., values: _Optional[_Iterable[float]] = ..., datetime_start: _Optional[str] = ..., datetime_complete: _Optional[str] = ..., params: _Optional[_Mapping[str, float]] = ..., distributions: _Optional[_Mapping[str, str]] = ..., user_attributes: _Optional[_Mapping[str, str]] = ..., system_attributes: _Optional[_Mapping[str, str]] = ..., intermediate_values: _Optional[_Mapping[int, float]] = ...) -> None: ...
