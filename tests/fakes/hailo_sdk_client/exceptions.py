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


class AccelerasNanExponentError(Exception):
    """The "nan exponent" an a16 conv gave on DFC 5.3.0 / Hailo-10H (community thread 19530, the
    public report's follow-up). The real exception class is not public: this name is the fake's
    own, and hefsearch must not (and does not) know it."""


class AllocatorDefuseError(Exception):
    """The compile that "needs super-defuse" (community thread 19530). The real class and message
    are not public: both are the fake's own."""
