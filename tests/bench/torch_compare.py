#!/usr/bin/env python3
"""fusednorm's rmsnorm_quant against torch.compile on one GPU, in one process, timed the same way.

Each case runs the same RMSNorm + FP8 (f8e4m3fn) quantization twice: through libfusednorm.so's C
API (DLTensor views of torch tensors, via ctypes) and as the few lines of PyTorch a user would
write, compiled by torch.compile (Inductor, Triton kernels). Both are timed alike: calls rotate over
buffer sets of at least --rotate-mib MiB (inputs, weight, outputs and scales all rotate, so no call
finds its data in L2; only the static mode's 4-byte scale is shared), one call per set is captured into a CUDA graph, the graph is replayed, and
the time per call is the median over samples of at least 1 ms divided by the calls. The copy
bandwidth (a device-to-device copy, bytes read + written) is measured in the same run, and every
time is also given as a share of it (bytes the call must move / time / copy bandwidth).

The PyTorch version computes y = x * rsqrt(mean(x^2) + eps) * w in f32 and, dynamic modes, the
scale amax / 448 (clamped away from 0) and q = clamp(y * (1 / scale)) cast to f8e4m3fn: the usual
way of writing it in PyTorch. It is not bit-exact to
numerics.md (rsqrt is approximate, the order of the sum is the compiler's); the `diff%` column is
the share of output codes that differ from fusednorm's on the first buffer set, `ediff%` the same
for the uncompiled (eager) PyTorch code. Columns: us per call of each, speedup = torch.compile's
time / fusednorm's, each as % of copy bandwidth, and compile_s, the seconds of the compiled code's
first call (its compilation).

Usage (on the device): bash tests/scripts/gpu.sh build compare, or after building the library
  python3 tests/bench/torch_compare.py --lib build-gpu/libfusednorm.so \
      [--modes static,row,group128,residual_row] [--hidden 2048,...] [--tokens 1,8,16384]
"""
import argparse
import ctypes
import math
import pathlib
import statistics
import sys
import time

import torch
import torch._dynamo

FP8_MAX = 448.0
EPS = 1e-6


# ---------------------------------------------------------------- the C API through ctypes
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "python"))
from fusednorm_ctypes import DLDataType, DLDevice, DLTensor, RmsnormQuantOptions as Options  # noqa: E402
import fusednorm_ctypes  # noqa: E402

KDL_CUDA = 2
DL_TYPES = {  # DLPack (1.1) type codes, as include/fusednorm/fusednorm.h
    torch.float32: (2, 32), torch.float16: (2, 16), torch.bfloat16: (4, 16), torch.int8: (0, 8),
    torch.float8_e4m3fn: (10, 8),
}
SCALE_STATIC, SCALE_ROW, SCALE_GROUP = 0, 1, 2


class Lib:
    def __init__(self, path):
        self.so = fusednorm_ctypes.load(path)

    def version(self):
        return self.so.fusednorm_version(None, None, None).decode()

    @staticmethod
    def tensor(t):
        """A DLTensor describing torch tensor t (kept alive with its shape and strides)."""
        if t is None:
            return None
        code, bits = DL_TYPES[t.dtype]
        d = DLTensor()
        d.data = t.data_ptr()
        d.device = DLDevice(KDL_CUDA, t.device.index or 0)
        d.ndim = t.dim()
        d.dtype = DLDataType(code, bits, 1)
        d._shape = (ctypes.c_int64 * t.dim())(*t.shape)
        d._strides = (ctypes.c_int64 * t.dim())(*t.stride())
        d.shape = d._shape
        d.strides = d._strides
        d.byte_offset = 0
        return d

    def options(self, mode, group):
        o = Options()
        self.so.fusednorm_rmsnorm_quant_options_init(ctypes.byref(o))
        o.scale_mode = mode
        o.group_size = group
        o.eps = EPS
        return o

    def bind(self, x, res, w, out, scales, opts):
        """A call of rmsnorm_quant on these tensors, on the current stream when called."""
        args = [self.tensor(t) for t in (x, res, w, out, scales)]
        ptrs = [ctypes.pointer(a) if a is not None else None for a in args]
        so = self.so

        def call():
            st = so.fusednorm_rmsnorm_quant(*ptrs, ctypes.byref(opts),
                                            ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
            if st != 0:
                raise RuntimeError("fusednorm_rmsnorm_quant: %d: %s" % (st, so.fusednorm_last_error().decode()))
        call.keep = (args, opts)
        return call


# ---------------------------------------------------------------- the PyTorch formulation
def t_norm(x, w):
    xf = x.float()
    return xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + EPS) * w.float()


def t_static(x, w, scale):
    y = t_norm(x, w)
    return (y * scale.reciprocal()).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)


def t_row(x, w):
    y = t_norm(x, w)
    s = (y.abs().amax(-1, keepdim=True) / FP8_MAX).clamp(min=1e-12)
    return (y * s.reciprocal()).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), s


def t_group128(x, w):
    y = t_norm(x, w).unflatten(-1, (-1, 128))
    s = (y.abs().amax(-1, keepdim=True) / FP8_MAX).clamp(min=1e-12)
    q = (y * s.reciprocal()).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q.flatten(-2), s.squeeze(-1)


def t_residual_row(x, r, w):
    h = x + r  # rounded to the input dtype, as fusednorm
    r.copy_(h)
    return t_row(h, w)


MODES = {  # name: (torch function, fusednorm scale mode, group, residual)
    "static": (t_static, SCALE_STATIC, 0, False),
    "row": (t_row, SCALE_ROW, 0, False),
    "group128": (t_group128, SCALE_GROUP, 128, False),
    "residual_row": (t_residual_row, SCALE_ROW, 0, True),
}


# ---------------------------------------------------------------- timing
def time_graph(calls, target_s):
    """Per-call seconds: one call per buffer set captured into a graph, replays timed by events."""
    for c in calls:  # warm-up (and torch.compile's compilation) outside the capture
        c()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    keep = []
    with torch.cuda.graph(g):
        for c in calls:
            keep.append(c())
    g.replay()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    g.replay()
    e1.record()
    e1.synchronize()
    est = max(e0.elapsed_time(e1) * 1e-3, 1e-7)
    inner = max(1, math.ceil(1e-3 / est))
    samples = int(min(500, max(5, round(target_s / (inner * est)))))
    times = []
    for _ in range(samples):
        g.replay()  # lead-in: the stream is busy when the start event is recorded
        e0.record()
        for _ in range(inner):
            g.replay()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) * 1e-3 / inner)
    del g, keep
    return statistics.median(times) / len(calls)


def copy_gbps(mib=1024, reps=25):
    n = mib << 20
    src = torch.empty(n, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(reps):
        e0.record()
        dst.copy_(src)
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1) * 1e-3)
    return 2 * n / statistics.median(ts) / 1e9


# ---------------------------------------------------------------- one case
def run_case(lib, compiled, mode, rows, h, rotate_bytes, target_s, gen):
    fn, smode, group, residual = MODES[mode]
    nscales = 0 if smode == SCALE_STATIC else (h // group if group else 1)
    # Bytes a call must move (the residual read and written), and so one buffer set's.
    set_bytes = rows * h * (2 + 1 + (4 if residual else 0)) + h * 2 + rows * nscales * 4
    sets = max(2, math.ceil(rotate_bytes / set_bytes))
    dev = "cuda"
    x = torch.randn(sets, rows, h, device=dev, generator=gen).to(torch.bfloat16)
    w = (1.0 + 0.1 * torch.randn(sets, h, device=dev, generator=gen)).to(torch.bfloat16)
    res = torch.randn(sets, rows, h, device=dev, generator=gen).to(torch.bfloat16) if residual else None
    res_t = res.clone() if residual else None  # torch's own residual buffers (updated in place)
    out = torch.empty(sets, rows, h, device=dev, dtype=torch.float8_e4m3fn)
    scales = (torch.full((1,), 0.02, device=dev) if smode == SCALE_STATIC
              else torch.empty(sets, rows, nscales, device=dev, dtype=torch.float32))
    opts = lib.options(smode, group)

    def torch_args(i, r):  # the PyTorch function's arguments for set i, residual r
        return (x[i], r, w[i]) if residual else (x[i], w[i], scales) if smode == SCALE_STATIC else (x[i], w[i])

    ours = [lib.bind(x[i], res[i] if residual else None, w[i], out[i],
                     scales if smode == SCALE_STATIC else scales[i], opts) for i in range(sets)]
    theirs = [(lambda i=i: compiled(*torch_args(i, res_t[i] if residual else None))) for i in range(sets)]

    # Codes that differ from fusednorm's on set 0, for the compiled and the eager PyTorch code (each
    # from the same residual values, which every call updates).
    q_eager = fn(*torch_args(0, res_t[0].clone() if residual else None))
    if residual:
        res[0].copy_(res_t[0])
    ours[0]()
    t0 = time.time()
    q = theirs[0]()
    compile_s = time.time() - t0
    torch.cuda.synchronize()

    def differ(v):
        v = v[0] if isinstance(v, tuple) else v
        return (v.view(torch.uint8) != out[0].view(torch.uint8)).float().mean().item()
    diff, ediff = differ(q), differ(q_eager)

    t_ours = time_graph(ours, target_s)
    t_theirs = time_graph(theirs, target_s)
    del x, w, res, res_t, out, scales, ours, theirs
    torch.cuda.empty_cache()
    return dict(sets=sets, ours=t_ours, theirs=t_theirs, moved=set_bytes, diff=diff, ediff=ediff, compile_s=compile_s)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True, help="path of libfusednorm.so (its CUDA plugin beside it)")
    ap.add_argument("--modes", default="static,row,group128,residual_row")
    ap.add_argument("--hidden", default="2048,4096,5120,7168,8192,16384")
    ap.add_argument("--tokens", default="1,8,16384")
    ap.add_argument("--rotate-mib", type=int, default=256)
    ap.add_argument("--time", type=float, default=0.2, help="seconds of timed replays per case and side")
    a = ap.parse_args()

    lib = Lib(a.lib)
    gen = torch.Generator(device="cuda").manual_seed(20240611)
    for k in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit", "accumulated_cache_size_limit"):
        if hasattr(torch._dynamo.config, k):
            setattr(torch._dynamo.config, k, 4096)
    import triton  # noqa: F401 (its version, printed)
    p = torch.cuda.get_device_properties(0)
    bw = copy_gbps()
    print("# torch_compare: fusednorm %s against torch.compile (torch %s, triton %s) on %s, %d SMs"
          % (lib.version(), torch.__version__, triton.__version__, p.name, p.multi_processor_count))
    print("# copy bandwidth: %.2f GB/s (bytes read + written, 1024 MiB, median of 25)" % bw)
    print("# bf16 in, f8e4m3fn out, bf16 weight; every case: graph replay of one call per buffer set, sets of"
          " >= %d MiB, median of samples >= 1 ms; us per call" % a.rotate_mib)
    print("%-13s %6s %6s %6s %10s %10s %8s %7s %7s %8s %8s %9s"
          % ("mode", "rows", "cols", "sets", "fusednorm", "compile", "speedup", "fn%copy", "tc%copy", "diff%", "ediff%",
             "compile_s"))
    compiled = {m: torch.compile(MODES[m][0], dynamic=False) for m in MODES}
    for rows in [int(v) for v in a.tokens.split(",")]:
        for h in [int(v) for v in a.hidden.split(",")]:
            for mode in a.modes.split(","):
                r = run_case(lib, compiled[mode], mode, rows, h, a.rotate_mib << 20, a.time, gen)
                pct = lambda t: 100.0 * r["moved"] / t / (bw * 1e9)
                print("%-13s %6d %6d %6d %10.2f %10.2f %7.2fx %7.1f %7.1f %8.3f %8.3f %9.1f"
                      % (mode, rows, h, r["sets"], r["ours"] * 1e6, r["theirs"] * 1e6, r["theirs"] / r["ours"],
                         pct(r["ours"]), pct(r["theirs"]), 100.0 * r["diff"], 100.0 * r["ediff"], r["compile_s"]))
                sys.stdout.flush()


if __name__ == "__main__":
    main()
