"""The GIL is released during a call, and calls from several Python threads at once give each
thread its own results and its own error messages."""

import sys
import threading
import time

import numpy as np

import fusednorm
from oracle import codes


def test_gil_is_released_during_the_call():
    """A second thread counts while it holds the GIL. With a long switch interval the main thread
    keeps the GIL through its Python code, so the counter can only move while the C call has
    released it; the count is read first thing after the call returns."""
    x = np.random.default_rng(0).standard_normal(1 << 24).astype(np.float32)  # 64 MiB
    out = np.empty(x.shape, np.float16)
    counts, inside, stop = [0], threading.Event(), threading.Event()

    def spin():
        while not stop.is_set():
            if inside.is_set():
                counts[0] += 1

    interval = sys.getswitchinterval()
    t = threading.Thread(target=spin)
    t.start()
    during = []
    try:
        # Up to 5 tries, for a loaded machine where the spinning thread may get no core during
        # one call; with the GIL held through the call every try counts exactly 0.
        while len(during) < 5 and not any(during):
            time.sleep(0.01)
            sys.setswitchinterval(0.5)
            inside.set()
            fusednorm.cast(x, out=out)
            during.append(counts[0])
            inside.clear()
            sys.setswitchinterval(interval)
            counts[0] = 0
    finally:
        sys.setswitchinterval(interval)
        stop.set()
        t.join()
    assert np.array_equal(out, x.astype(np.float16))
    assert any(during), during


def test_threads_get_their_own_results_and_errors():
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((64, 512)).astype(np.float32) for _ in range(8)]
    w = np.ones(512, np.float32)
    want = [fusednorm.rmsnorm_quant(x, w, scale_mode="group") for x in xs]
    got, errors = [None] * len(xs), [None] * len(xs)

    def work(i):
        for _ in range(20):
            got[i] = fusednorm.rmsnorm_quant(xs[i], w, scale_mode="group")
            try:  # a bad call on every other thread: its message must name its own shape
                fusednorm.rmsnorm_quant(xs[i], np.ones(100 + i, np.float32))
            except fusednorm.InvalidArgumentError as e:
                errors[i] = e.message

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, (g, w_) in enumerate(zip(got, want)):
        assert np.array_equal(codes(g[0]), codes(w_[0])) and np.array_equal(g[1], w_[1])
        assert "weight has shape [%d]" % (100 + i) in errors[i]
