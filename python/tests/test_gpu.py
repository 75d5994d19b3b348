"""GPU: PyTorch CUDA tensors and CuPy arrays through the CUDA plugin. Every result must equal the
CPU backend's bytes (the library's promise); the call must run on the producer's stream and be
capturable in a CUDA graph. Skipped, with the reason, without PyTorch, a CUDA device or the
plugin (docs/python.md, "GPU": FUSEDNORM_PLUGIN_DIR=build-gpu after tests/scripts/gpu.sh build)."""

import numpy as np
import pytest

import fusednorm
from conftest import TORCH_SKIP
from oracle import codes


def _skip_reason():
    if TORCH_SKIP:
        return TORCH_SKIP
    import torch
    if not torch.cuda.is_available():
        return "PyTorch sees no CUDA device"
    cuda = [b for b in fusednorm.backends() if b["name"] == "cuda"][0]
    if not cuda["available"]:
        return "the CUDA backend is unavailable: " + cuda["detail"]
    return None


SKIP = _skip_reason()
pytestmark = pytest.mark.skipif(SKIP is not None, reason=SKIP or "")
if SKIP is None:
    import torch

H = 4096


def data(rows=64, dtype="bfloat16", seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, H, generator=g).to(getattr(torch, dtype))
    w = (torch.rand(H, generator=g) + 0.5).to(getattr(torch, dtype))
    return x, w


def same(a, b):
    return np.array_equal(codes(a), codes(b))


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2", "int8"])
@pytest.mark.parametrize("mode", ["row", "group"])
def test_cuda_equals_cpu(dtype, mode):
    x, w = data()
    qc, sc = fusednorm.rmsnorm_quant(x, w, dtype=dtype, scale_mode=mode)
    qg, sg = fusednorm.rmsnorm_quant(x.cuda(), w.cuda(), dtype=dtype, scale_mode=mode)
    assert qg.is_cuda and sg.is_cuda and qg.dtype == qc.dtype
    torch.cuda.synchronize()
    assert same(qg, qc) and same(sg, sc)


def test_cuda_out_form_residual_and_cast():
    x, w = data(seed=1)
    r = data(seed=2)[0]
    rc, rg = r.clone(), r.cuda()
    qc, sc = fusednorm.rmsnorm_quant(x, w, residual=rc, scale_mode="group", scales_column_major=True)
    qg, sg = torch.empty_like(qc, device="cuda"), torch.empty_like(sc, device="cuda")
    fusednorm.rmsnorm_quant(x.cuda(), w.cuda(), residual=rg, scale_mode="group", out=(qg, sg))
    assert same(qg, qc) and same(sg, sc) and same(rg, rc)
    # fusednorm.cast runs on the CPU only (the GPU plugins do not offer it): decode on the host.
    assert same(fusednorm.cast(qg.cpu(), "float32"), fusednorm.cast(qc, "float32"))


def busy_then_fill(stream, x_dev, values):
    """On `stream`: ~50 ms of GPU sleep, then x_dev = values (both on the GPU, made before the
    last synchronization). Work on another stream that reads x_dev without waiting sees zeros."""
    with torch.cuda.stream(stream):
        torch.cuda._sleep(100_000_000)
        x_dev.copy_(values, non_blocking=True)


def test_runs_on_the_current_stream():
    x, w = data(seed=3)
    want = fusednorm.rmsnorm_quant(x, w)
    s = torch.cuda.Stream()
    xg, wg, src = torch.zeros_like(x, device="cuda"), w.cuda(), x.cuda()
    torch.cuda.synchronize()
    busy_then_fill(s, xg, src)
    with torch.cuda.stream(s):
        got = fusednorm.rmsnorm_quant(xg, wg)
    s.synchronize()
    assert same(got[0], want[0]) and same(got[1], want[1])


def test_stream_argument():
    x, w = data(seed=4)
    want = fusednorm.rmsnorm_quant(x, w)
    s = torch.cuda.Stream()
    xg, wg, src = torch.zeros_like(x, device="cuda"), w.cuda(), x.cuda()
    q, sc = torch.empty(want[0].shape, dtype=want[0].dtype, device="cuda"), torch.empty(want[1].shape, device="cuda")
    torch.cuda.synchronize()
    busy_then_fill(s, xg, src)
    fusednorm.rmsnorm_quant(xg, wg, out=(q, sc), stream=s)  # called outside the stream's context
    s.synchronize()
    assert same(q, want[0]) and same(sc, want[1])


def test_cuda_graph_capture():
    x, w = data(seed=5)
    xg, wg = x.cuda(), w.cuda()
    fusednorm.rmsnorm_quant(xg, wg)  # the plugin's first call (loading, initialization) before capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        q, s = fusednorm.rmsnorm_quant(xg, wg, scale_mode="group")
    x2 = data(seed=6)[0]
    xg.copy_(x2.cuda())
    graph.replay()
    torch.cuda.synchronize()
    want = fusednorm.rmsnorm_quant(x2, w, scale_mode="group")
    assert same(q, want[0]) and same(s, want[1])


def test_torch_compile_on_cuda():
    torch._dynamo.reset()
    x, w = data(seed=7)

    def f(x, w):
        # The codes decoded by PyTorch (fusednorm.cast is CPU-only), on the device of x.
        q, s = fusednorm.rmsnorm_quant(x, w, scale_mode="group")
        return q.to(torch.float32) * s.repeat_interleave(128, dim=-1)
    got = torch.compile(f, fullgraph=True)(x.cuda(), w.cuda())
    assert same(got, f(x, w))


def test_cupy():
    cp = pytest.importorskip("cupy")
    x, w = data(seed=8, dtype="float32")
    want = fusednorm.rmsnorm_quant(x, w, dtype="float8_e4m3fn")
    q, s = fusednorm.rmsnorm_quant(cp.asarray(x.numpy()), cp.asarray(w.numpy()), dtype="float8_e4m3fn")
    cp.cuda.get_current_stream().synchronize()
    assert np.array_equal(cp.asnumpy(q).view(np.uint8), codes(want[0]))
    assert np.array_equal(cp.asnumpy(s), codes(want[1]).view(np.float32))
