"""Shared fixtures: the framework each test runs in (NumPy always; PyTorch where it imports)."""

import pytest

try:
    import torch  # noqa: F401
    TORCH_SKIP = None
except Exception as e:  # pragma: no cover - environment dependent
    TORCH_SKIP = "PyTorch cannot be imported (%s): tests/scripts/python.sh installs it unless FUSEDNORM_PY_TORCH=0" % (e,)

requires_torch = pytest.mark.skipif(TORCH_SKIP is not None, reason=TORCH_SKIP or "")


@pytest.fixture(params=["numpy", "torch"])
def fw(request):
    if request.param == "torch" and TORCH_SKIP:
        pytest.skip(TORCH_SKIP)
    return request.param
