"""Fixtures shared by the engine tests."""
import pytest

# internal: the kernels' SIMD dispatch, forced level by level
from hybridsearch._native import _kernels as K

SIMD_LEVELS = ("scalar", "avx2", "avx512", "neon")  # every name the kernels know (K.SIMD_NAMES)


@pytest.fixture(params=SIMD_LEVELS)
def simd(request):
    """Runs the test at one forced SIMD level (skipped where the CPU lacks it, after checking
    that the kernels do not list it), then puts the best level back."""
    best = K.simd_level()
    got = K.force_simd(request.param)
    if got != request.param:
        K.force_simd(best)
        assert request.param not in K.simd_levels()
        pytest.skip(f"this CPU has no {request.param} (best: {best})")
    yield got
    K.force_simd(best)
