"""Build of the native core: kernels/*.c (plain C11) + Cython wrappers."""
import glob

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

KERNELS = sorted(glob.glob("kernels/*.c"))

# No -march=native: SIMD variants are compiled per function with target
# attributes and chosen at run time, so one build runs on any x86-64.
COMPILE_ARGS = ["-O3", "-std=c11", "-fno-strict-aliasing", "-Wno-unused-function"]

extensions = [
    Extension(
        "hybridsearch._native._kernels",
        sources=["hybridsearch/_native/_kernels.pyx"] + KERNELS,
        include_dirs=["kernels", numpy.get_include()],
        extra_compile_args=COMPILE_ARGS + ["-pthread"],
        extra_link_args=["-pthread"],
        depends=sorted(glob.glob("kernels/*.h")) + ["hybridsearch/_native/hnsw.pxi", "hybridsearch/_native/invindex.pxi", "hybridsearch/_native/hits.pxi",
                                                    "hybridsearch/_native/hash.pxi", "hybridsearch/_native/lexicon.pxi",
                                                    "hybridsearch/_native/rwlock.pxi", "hybridsearch/_native/find.pxi",
                                                    "hybridsearch/_native/maxsim.pxi", "hybridsearch/_native/sparse.pxi",
                                                    "hybridsearch/_native/rabitq.pxi",
                                                    "hybridsearch/_native/ingest.pxi",
                                                    "hybridsearch/_native/kernels.pxd"],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    ),
]

setup(
    ext_modules=cythonize(extensions, language_level=3, include_path=["hybridsearch/_native"]),
)
