"""version(), cpu_target(), backends(), and where the GPU plugins are looked for."""

import importlib.metadata
import os
import re
import subprocess
import sys

import fusednorm


def test_version_is_the_library_and_package_version():
    v = fusednorm.version()
    assert re.fullmatch(r"\d+\.\d+\.\d+", v)
    assert fusednorm.__version__ == v == importlib.metadata.version("fusednorm")


def test_cpu_target():
    assert fusednorm.cpu_target() in {"AVX3_SPR", "AVX3_ZEN4", "AVX3_DL", "AVX3", "AVX2", "SSE4", "SSSE3", "SSE2",
                                      "EMU128", "SCALAR", "NEON", "NEON_BF16", "SVE", "SVE2", "SVE_256",
                                      "SVE2_128", "PPC8", "PPC9", "PPC10", "RVV", "WASM", "WASM_EMU256"}


def test_backends():
    b = {i["name"]: i for i in fusednorm.backends()}
    assert set(b) == {"cpu", "cuda", "hip"}
    assert b["cpu"]["available"] and b["cpu"]["device_count"] == 1 and b["cpu"]["device_type"] == 1
    assert fusednorm.cpu_target() in b["cpu"]["detail"]
    assert (b["cuda"]["device_type"], b["hip"]["device_type"]) == (2, 10)
    for name in ("cuda", "hip"):
        if not b[name]["available"]:  # the loader's text names what it tried
            assert "libfusednorm_%s.so" % name in b[name]["detail"]


def test_plugins_are_looked_for_like_the_c_library_does(tmp_path):
    """$FUSEDNORM_PLUGIN_DIR first, then the package directory (beside libfusednorm.so)."""
    code = "import fusednorm; print([b['detail'] for b in fusednorm.backends() if b['name'] == 'cuda'][0])"
    env = dict(os.environ, FUSEDNORM_PLUGIN_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    if "unavailable" in out and "no usable" in out:
        package_dir = os.path.dirname(fusednorm.__file__)
        assert str(tmp_path / "libfusednorm_cuda.so") in out
        assert os.path.join(package_dir, "libfusednorm_cuda.so") in out
        assert out.index(str(tmp_path)) < out.index(package_dir)
