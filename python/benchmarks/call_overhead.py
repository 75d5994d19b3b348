"""Host cost of one fusednorm call from Python over the same C call, on the CPU.

Times fusednorm_rmsnorm_quant on a [1, 128] float32 row (the kernel's own time is a small,
constant part of every line) through
  - the C entry point, called through ctypes (tests/python/fusednorm_ctypes.py) with prepared
    DLTensors: the baseline; ctypes itself adds some of this time
  - fusednorm.rmsnorm_quant, out= form and functional form, from NumPy and PyTorch CPU tensors
and prints each in microseconds (the best of 5 runs of N calls) and its difference to the baseline.
Where PyTorch sees a CUDA device, the same on the GPU: [1, 128] on cuda:0, the C call given the
current stream; calls are enqueued in chunks of 256 (fewer than the launch queue holds) with a
synchronization between chunks that is not timed, so each line is the host's cost of a call.

    python python/benchmarks/call_overhead.py [N]
"""

import ctypes
import os
import sys
import time

import ml_dtypes
import numpy as np

try:  # before fusednorm: the import order docs/python.md asks for (known problems)
    import torch
except ImportError:
    torch = None

import fusednorm

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "python"))
import fusednorm_ctypes as fc  # noqa: E402


def best_us(fn, n):
    for _ in range(n // 10):
        fn()
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t) / n)
    return best * 1e6


def best_us_enqueue(fn, n, sync, chunk=256):
    for _ in range(chunk):
        fn()
    best = float("inf")
    for _ in range(5):
        spent = 0.0
        for _ in range(max(1, n // chunk)):
            sync()
            t = time.perf_counter()
            for _ in range(chunk):
                fn()
            spent += time.perf_counter() - t
        best = min(best, spent / (max(1, n // chunk) * chunk))
    sync()
    return best * 1e6


def c_call(lib, ptrs, device, stream=None):
    """fusednorm_rmsnorm_quant through ctypes on prepared DLTensors: x [1, 128] f32, w [128] f32,
    q [1, 128] f8e4m3fn, s [1, 1] f32 at the data pointers `ptrs` on `device`. Returns what the
    call needs kept alive, and the call."""
    tensors = [fc.dl_tensor(ptrs[0], device, fc.kDLFloat, 32, (1, 128)),
               fc.dl_tensor(ptrs[1], device, fc.kDLFloat, 32, (128,)),
               fc.dl_tensor(ptrs[2], device, fc.kDLFloat8_e4m3fn, 8, (1, 128)),
               fc.dl_tensor(ptrs[3], device, fc.kDLFloat, 32, (1, 1))]
    opts = fc.RmsnormQuantOptions()
    lib.fusednorm_rmsnorm_quant_options_init(ctypes.byref(opts))
    px, pw, pq, ps, po = (ctypes.byref(t) for t in tensors + [opts])
    fn = lib.fusednorm_rmsnorm_quant
    return (tensors, opts), lambda: fn(px, None, pw, pq, ps, po, stream)


def print_rows(rows, timer):
    """Each row's time by `timer` and its difference to the first row's (the C call)."""
    base = None
    for name, fn in rows:
        us = timer(fn)
        base = us if base is None else base
        print("  %-24s %6.2f us  %+6.2f us" % (name, us, us - base))


def cuda_rows(lib, torch):
    """The GPU lines: the C call (the current stream) and the Python calls."""
    dev = torch.device("cuda", 0)
    x = torch.randn(1, 128, device=dev)
    w = torch.ones(128, device=dev)
    q = torch.empty(1, 128, dtype=torch.float8_e4m3fn, device=dev)
    s = torch.empty(1, 1, device=dev)
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    keep, call = c_call(lib, [t.data_ptr() for t in (x, w, q, s)], (fc.kDLCUDA, 0), stream)
    return (keep, x, w, q, s), [("C (ctypes), cuda:0", call),
                                ("torch CUDA, out=", lambda: fusednorm.rmsnorm_quant(x, w, out=(q, s))),
                                ("torch CUDA, functional", lambda: fusednorm.rmsnorm_quant(x, w))]


def main(n=20000):
    # The library inside the package, else the one the extension loaded (an installed library:
    # FUSEDNORM_PYTHON_USE_INSTALLED), which dlopen finds by its SONAME.
    path = os.path.join(os.path.dirname(fusednorm.__file__), "libfusednorm.so.0")
    lib = fc.load(path if os.path.exists(path) else "libfusednorm.so.0")
    x = np.random.default_rng(0).standard_normal((1, 128)).astype(np.float32)
    w = np.ones(128, np.float32)
    q = np.zeros((1, 128), ml_dtypes.float8_e4m3fn)
    s = np.zeros((1, 1), np.float32)
    keep, call = c_call(lib, [a.ctypes.data for a in (x, w, q, s)], (fc.kDLCPU, 0))
    rows = [("C (ctypes)", call),
            ("numpy, out=", lambda: fusednorm.rmsnorm_quant(x, w, out=(q, s))),
            ("numpy, functional", lambda: fusednorm.rmsnorm_quant(x, w))]
    if torch is None:
        print("(no PyTorch: its rows are left out)")
    else:
        xt, wt = torch.from_numpy(x), torch.from_numpy(w)
        qt, st = torch.empty(1, 128, dtype=torch.float8_e4m3fn), torch.empty(1, 1)
        rows += [("torch CPU, out=", lambda: fusednorm.rmsnorm_quant(xt, wt, out=(qt, st))),
                 ("torch CPU, functional", lambda: fusednorm.rmsnorm_quant(xt, wt))]
    print("fusednorm %s, %s; rmsnorm_quant [1, 128] f32 -> f8e4m3fn, per call:" % (fusednorm.version(),
                                                                                 fusednorm.cpu_target()))
    print_rows(rows, lambda fn: best_us(fn, n))
    if torch is None:
        return
    if not torch.cuda.is_available():
        print("(PyTorch sees no CUDA device: no GPU lines)")
        return
    keep_gpu, rows = cuda_rows(lib, torch)
    print("%s; per call, host time to enqueue:" % torch.cuda.get_device_name(0))
    print_rows(rows, lambda fn: best_us_enqueue(fn, n, torch.cuda.synchronize))
    del keep, keep_gpu


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:2]))
