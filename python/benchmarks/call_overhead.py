"""Host cost of one fusednorm call from Python over the same C call, on the CPU.

Times fusednorm_rmsnorm_quant on a [1, 128] float32 row (the kernel's own time is a small,
constant part of every line) through
  - the C entry point, called through ctypes (tests/python/fusednorm_ctypes.py) with prepared
    DLTensors: the baseline; ctypes itself adds some of this time
  - fusednorm.rmsnorm_quant, out= form and functional form, from NumPy and PyTorch CPU tensors
and prints each in microseconds (the best of 5 runs of N calls) and its difference to the baseline.

    python python/benchmarks/call_overhead.py [N]
"""

import ctypes
import os
import sys
import time

import ml_dtypes
import numpy as np

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


def main(n=20000):
    lib = fc.load(os.path.join(os.path.dirname(fusednorm.__file__), "libfusednorm.so.0"))
    x = np.random.default_rng(0).standard_normal((1, 128)).astype(np.float32)
    w = np.ones(128, np.float32)
    q = np.zeros((1, 128), ml_dtypes.float8_e4m3fn)
    s = np.zeros((1, 1), np.float32)
    cpu = (fc.kDLCPU, 0)
    tensors = [fc.dl_tensor(x.ctypes.data, cpu, fc.kDLFloat, 32, x.shape),
               fc.dl_tensor(w.ctypes.data, cpu, fc.kDLFloat, 32, w.shape),
               fc.dl_tensor(q.ctypes.data, cpu, fc.kDLFloat8_e4m3fn, 8, q.shape),
               fc.dl_tensor(s.ctypes.data, cpu, fc.kDLFloat, 32, s.shape)]
    opts = fc.RmsnormQuantOptions()
    lib.fusednorm_rmsnorm_quant_options_init(ctypes.byref(opts))
    px, pw, pq, ps, po = (ctypes.byref(t) for t in tensors + [opts])
    c_call = lib.fusednorm_rmsnorm_quant
    rows = [("C (ctypes)", lambda: c_call(px, None, pw, pq, ps, po, None)),
            ("numpy, out=", lambda: fusednorm.rmsnorm_quant(x, w, out=(q, s))),
            ("numpy, functional", lambda: fusednorm.rmsnorm_quant(x, w))]
    try:
        import torch
        xt, wt = torch.from_numpy(x), torch.from_numpy(w)
        qt, st = torch.empty(1, 128, dtype=torch.float8_e4m3fn), torch.empty(1, 1)
        rows += [("torch CPU, out=", lambda: fusednorm.rmsnorm_quant(xt, wt, out=(qt, st))),
                 ("torch CPU, functional", lambda: fusednorm.rmsnorm_quant(xt, wt))]
    except ImportError:
        print("(no PyTorch: its rows are left out)")
    base = None
    print("fusednorm %s, %s; rmsnorm_quant [1, 128] f32 -> f8e4m3fn, per call:" % (fusednorm.version(),
                                                                                 fusednorm.cpu_target()))
    for name, fn in rows:
        us = best_us(fn, n)
        base = us if base is None else base
        print("  %-24s %6.2f us  %+6.2f us" % (name, us, us - base))


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:2]))
