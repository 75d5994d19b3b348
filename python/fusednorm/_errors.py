"""Exceptions: one class per status of fusednorm.h, all subclasses of fusednorm.Error."""


class Error(RuntimeError):
    """A fusednorm call failed. `status` is the C status (int), `status_name` its name
    ("INVALID_ARGUMENT", ...), `message` the library's message naming the argument and values."""

    status = -1
    status_name = "ERROR"

    def __init__(self, message, status=None):
        if status is not None:
            self.status = status
        self.message = message
        super().__init__("%s: %s" % (self.status_name, message))


class InvalidArgumentError(Error, ValueError):
    """FUSEDNORM_INVALID_ARGUMENT: the call is malformed (NULL, shape, dtype, range, overlap)."""
    status, status_name = 1, "INVALID_ARGUMENT"


class UnsupportedError(Error, NotImplementedError):
    """FUSEDNORM_UNSUPPORTED: well-formed, but this combination is not implemented."""
    status, status_name = 2, "UNSUPPORTED"


class BackendUnavailableError(Error):
    """FUSEDNORM_BACKEND_UNAVAILABLE: no plugin, runtime, driver or device for the tensors' device."""
    status, status_name = 3, "BACKEND_UNAVAILABLE"


class DeviceError(Error):
    """FUSEDNORM_DEVICE_ERROR: the vendor runtime failed (the message has its text)."""
    status, status_name = 4, "DEVICE_ERROR"


class InternalError(Error):
    """FUSEDNORM_INTERNAL_ERROR: a bug in fusednorm."""
    status, status_name = 5, "INTERNAL_ERROR"


for _cls in (Error, InvalidArgumentError, UnsupportedError, BackendUnavailableError, DeviceError, InternalError):
    _cls.__module__ = "fusednorm"  # shown as fusednorm.InvalidArgumentError in tracebacks

_BY_STATUS = {c.status: c for c in (InvalidArgumentError, UnsupportedError, BackendUnavailableError,
                                    DeviceError, InternalError)}


def check(result):
    """Raise the exception for a _C result: None on success, else (status, message)."""
    if result is None:
        return
    status, message = result
    cls = _BY_STATUS.get(status, Error)
    raise cls(message, status) if cls is Error else cls(message)
