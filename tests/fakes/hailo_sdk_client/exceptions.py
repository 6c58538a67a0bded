"""Exception types of the fake DFC. Only their names matter: hefsearch recognises the
allocator crash by the type name / message ``BackendAllocatorException``."""


class ParsingException(Exception):
    pass


class BackendAllocatorException(Exception):
    pass


class AccelerasValueError(ValueError):
    pass


class ModelScriptError(Exception):
    pass


class HailoNNException(Exception):
    pass
