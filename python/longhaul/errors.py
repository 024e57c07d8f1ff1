"""longhaul's errors: one class per status code (longhaul::StatusCode, the C ABI's
LH_* codes), all subclasses of LonghaulError, each with `.code` (the number the C
ABI returns) and `.code_name`.

    try:
        diloco = lh.DiLoCo(model)
    except lh.errors.Unavailable:      # the agent or a peer is unreachable: retrying may help
        ...
    except lh.LonghaulError as e:      # anything else from the library
        print(e.code_name, e)
"""


class LonghaulError(RuntimeError):
    """An error from the longhaul worker library; the message names what failed."""
    code = 13
    code_name = "INTERNAL"


def _error(name, code, code_name, doc):
    return type(name, (LonghaulError,), {"code": code, "code_name": code_name, "__doc__": doc,
                                          "__module__": __name__})


# The one table: class name, code, name (common/include/longhaul/common/status.h).
_TABLE = [
    ("InvalidArgument", 1, "INVALID_ARGUMENT", "Bad input: a config value, an argument, a message field."),
    ("NotFound", 2, "NOT_FOUND", "An unknown job, region, key or file."),
    ("AlreadyExists", 3, "ALREADY_EXISTS", "Something that exists already."),
    ("FailedPrecondition", 4, "FAILED_PRECONDITION", "A valid request in the wrong state."),
    ("DeadlineExceeded", 5, "DEADLINE_EXCEEDED", "A deadline passed (a peer or the agent did not answer in time)."),
    ("Unavailable", 6, "UNAVAILABLE", "A peer or the agent is unreachable or gone; retrying may help."),
    ("DataLoss", 7, "DATA_LOSS", "A checksum mismatch, a truncated frame, a corrupt file."),
    ("PermissionDenied", 8, "PERMISSION_DENIED", "A key not on the allowlist."),
    ("Aborted", 9, "ABORTED", "The round was aborted (a region failed); it is retried."),
    ("Cancelled", 10, "CANCELLED", "The operation was cancelled."),
    ("ResourceExhausted", 11, "RESOURCE_EXHAUSTED", "An oversized message, too many workers."),
    ("VersionMismatch", 12, "VERSION_MISMATCH", "The wire protocol versions differ."),
    ("Internal", 13, "INTERNAL", "A bug: please report it with the message."),
]

BY_CODE = {}
for _name, _code, _code_name, _doc in _TABLE:
    BY_CODE[_code] = globals()[_name] = _error(_name, _code, _code_name, _doc)
del _name, _code, _code_name, _doc


def error_class(code):
    """The class for a status code (LonghaulError itself for an unknown one)."""
    return BY_CODE.get(code, LonghaulError)


__all__ = ["LonghaulError", "BY_CODE", "error_class"] + [row[0] for row in _TABLE]
