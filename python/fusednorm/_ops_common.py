"""What the operation modules share (_ops_cast, _ops_quant, _ops_fp4, _ops_qk, _ops_mla). Each
operation has, in this order (docs/python.md, "adding an operation"):
  <op>_shapes(...)   logical shapes of the outputs it allocates (shared with the torch fakes)
  _<op>_options(...) the C options struct from keyword arguments (None: the library's default)
  <op>_into(...)     one C call on arrays the caller owns (also the torch custom op's body)
  <op>(...)          the public function: functional form (allocates) or out= form
Here: _C's arguments from arrays (_arg_in, _arg_out, _stream), names to the C enumerations
(_choice), memoized options (_cached_options), and the switch to the torch custom ops while
torch.compile traces (_torch_compiling).
"""

import sys

from ._formats import format_of
from ._frameworks import adapter

_NORMS = {"rms": 0, "none": 1}  # fusednorm_norm (rmsnorm_quant, rmsnorm_fp4)


def _choice(what, value, table):
    try:
        return table[value]
    except KeyError:
        raise ValueError("fusednorm: %s=%r; expected one of %s" % (what, value, ", ".join(map(repr, table))))


def _stream(stream, x):
    """The stream handle (int) for a call on x's device: `stream` as given (an int, a
    torch.cuda.Stream or a CuPy stream), else the one x's framework orders its work on."""
    if stream is None:
        return adapter(x).stream(x)
    if isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "ptr"):  # torch.cuda.Stream, cupy.cuda.Stream
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    raise TypeError("fusednorm: stream=%r is not an int, a torch.cuda.Stream or a CuPy stream" % (stream,))


def _resolve(a, x, f, what):
    """x's format: its own, or f where x holds raw codes (uint8/uint16); f must agree with a
    typed x. None: neither (the library reports x's element type)."""
    own = a.format(x)
    if f is None or own is None:
        return f or own
    if own is not f:
        raise ValueError("fusednorm: %s holds %s elements, not %s" % (what, own.name, f.name))
    return f


def _arg_in(x, f=None, what="input"):
    """_C's argument for input x (None stays None); f: its format where x holds raw codes."""
    if x is None:
        return None
    a = adapter(x)
    f = _resolve(a, x, f, what)
    return x if f is None else a.arg_in(x, f)


def _arg_out(x, f, finishers, what="output"):
    """_C's argument for output x; a staged output's finish() is appended to finishers."""
    if x is None:
        return None
    a = adapter(x)
    f = _resolve(a, x, f, what)
    if f is None:
        return x
    arg, finish = a.arg_out(x, f)
    if finish is not None:
        finishers.append(finish)
    return arg


def _opt_format(dtype):
    return None if dtype is None else format_of(dtype)


def _torch_compiling(x):
    # No adapter here: the first adapter of a framework is made on first use (TorchAdapter probes
    # PyTorch's DLPack export and imports fusednorm.torch), which torch.compile cannot trace when
    # the first call of the process is inside a compiled function.
    # torch is looked up in sys.modules once and kept: PyTorch 2.11's dynamo may fail to trace the
    # lookup ("dictionary changed size during iteration") while modules are being imported.
    global _torch_module
    torch = _torch_module
    if torch is None:
        torch = sys.modules.get("torch")
        if torch is None:
            return False
        _torch_module = torch
    return isinstance(x, torch.Tensor) and torch.compiler.is_compiling()


_torch_module = None


def _cached_options(make):
    """make(*args) -> a _C options object, memoized on its arguments: the options are read-only
    once made (the C call takes them const), so calls with the same arguments share one."""
    cache = {}

    def get(*args):
        try:
            return cache[args]
        except KeyError:
            o = cache[args] = make(*args)
            if len(cache) > 256:
                cache.pop(next(iter(cache)))
            return o
        except TypeError:  # an unhashable argument
            return make(*args)
    return get
