"""The library's queries: version, cpu_target, backends."""

from . import _C
from ._errors import check


def version():
    """The library's version string ("0.1.0")."""
    return _C.version()[0]


def cpu_target():
    """The Highway SIMD target the CPU backend dispatches to now ("AVX3", "AVX2", "SSE4", ...)."""
    return _C.cpu_target()


def backends():
    """Every backend fusednorm knows, available or not: a list of dicts with name ("cpu", "cuda",
    "hip"), device_type (DLPack), available, device_count and detail (the CPU's SIMD target and
    threads; for an unavailable backend the reason: the plugin loader's or the vendor's text)."""
    out = []
    for device_type in (1, 2, 10):
        info = _C.query_backend(device_type)
        check(info if isinstance(info, tuple) else None)
        out.append(info)
    return out
