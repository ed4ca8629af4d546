"""Package layout that pyproject.toml cannot express on its own.

``kernels/`` (CUDA sources) and ``pipelines/`` (bundled study definitions) are top-level folders of
the repository but must ship inside the installed package, so a wheel or a non-editable install
finds them through :mod:`importlib.resources` as ``embstab.kernels`` and ``embstab.pipelines``.
The CPU kernels are compiled here too: rounding (``embstab/lowprec/csrc/quantize_cpu.c``) and the
k-NN top-k selection (``embstab/measures/csrc/topk_cpu.c``). Both are optional: without a C
compiler the install still succeeds, and rounding and selection run on torch.
Everything else about the package is in ``pyproject.toml``.
"""

from setuptools import Extension, find_packages, setup

DATA_PACKAGES = {"embstab.kernels": "kernels", "embstab.pipelines": "pipelines"}

setup(
    packages=find_packages(include=["embstab", "embstab.*"]) + list(DATA_PACKAGES),
    package_dir=DATA_PACKAGES,
    # -O3 vectorises the rounding loop; never -ffast-math: the kernel relies on exact IEEE rounding
    ext_modules=[Extension("embstab.lowprec._quantize_cpu", ["embstab/lowprec/csrc/quantize_cpu.c"],
                           extra_compile_args=["-O3", "-std=c11"], optional=True),
                 Extension("embstab.measures._topk_cpu", ["embstab/measures/csrc/topk_cpu.c"],
                           extra_compile_args=["-O3", "-std=c11"], optional=True)],
    package_data={"embstab": ["py.typed"], "embstab.kernels": ["*.cu", "*.cuh"],
                  "embstab.pipelines": ["*.yaml", "*.md"]},
)
