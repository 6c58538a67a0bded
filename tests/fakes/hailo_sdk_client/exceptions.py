"""Exception types of the fake DFC. Only their names matter: hefsearch recognises the
report's walls by the type name / message ``BackendAllocatorException`` and
``NegativeSlopeExponentNonFixable``."""


class ParsingException(Exception):
    pass


class BackendAllocatorException(Exception):
    pass


class NegativeSlopeExponentNonFixable(Exception):
    """The optimizer's failure with negative_exponent and an 8-bit softmax (public Hailo-10H report)."""


class AccelerasValueError(ValueError):
    pass


class ModelScriptError(Exception):
    pass


class HailoNNException(Exception):
    pass
