# Builds torch_jsvd._C: a CUDAExtension when nvcc and a CUDA-enabled torch are
# present, otherwise a CppExtension of csrc/ only.
import glob
import os
import sys

import torch
from setuptools import find_packages, setup
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension

ROOT = os.path.dirname(os.path.abspath(__file__))


def _sources(pattern):
    return sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, pattern), recursive=True))


def _extension():
    with_cuda = CUDA_HOME is not None and torch.version.cuda is not None and os.environ.get("JSVD_NO_CUDA") != "1"
    # Accuracy matters more than the last few percent: no --use_fast_math / -ffast-math.
    cxx = ["-O3", "-std=c++17", "-DJSVD_PYTHON_MODULE"]
    sources = _sources("csrc/**/*.cpp")
    print(f"torch_jsvd: building a {'CUDA' if with_cuda else 'CPU-only'} extension", file=sys.stderr)
    if not with_cuda:
        return CppExtension("torch_jsvd._C", sources, extra_compile_args={"cxx": cxx}, include_dirs=[os.path.join(ROOT, "csrc")])
    # Hopper by default; TORCH_CUDA_ARCH_LIST (read by cpp_extension) overrides.
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
    sources += _sources("kernels/**/*.cpp") + _sources("kernels/**/*.cu")
    nvcc = ["-O3", "-std=c++17", "-DJSVD_WITH_CUDA", "-lineinfo"]
    return CUDAExtension(
        "torch_jsvd._C",
        sources,
        extra_compile_args={"cxx": cxx + ["-DJSVD_WITH_CUDA"], "nvcc": nvcc},
        include_dirs=[os.path.join(ROOT, "csrc"), os.path.join(ROOT, "kernels")],
        libraries=["cublas", "cusolver"],  # the QR's GEMMs (qr_precondition.cpp), the start's syevBatched (syev_batched.cpp)
    )


setup(
    name="torch_jsvd",
    version="0.1.0",
    description="Batched SVD by one-sided Jacobi as PyTorch custom ops (CPU and CUDA)",
    packages=find_packages(include=["torch_jsvd", "torch_jsvd.*"]),
    ext_modules=[_extension()],
    # BuildExtension uses ninja and honours MAX_JOBS.
    cmdclass={"build_ext": BuildExtension},
    python_requires=">=3.10",
    install_requires=["torch"],
)
