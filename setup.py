"""Package layout that pyproject.toml cannot express on its own.

``kernels/`` (CUDA sources) and ``pipelines/`` (bundled study definitions) are top-level folders of
the repository but must ship inside the installed package, so a wheel or a non-editable install
finds them through :mod:`importlib.resources` as ``embstab.kernels`` and ``embstab.pipelines``.
Everything else about the package is in ``pyproject.toml``.
"""

from setuptools import find_packages, setup

DATA_PACKAGES = {"embstab.kernels": "kernels", "embstab.pipelines": "pipelines"}

setup(
    packages=find_packages(include=["embstab", "embstab.*"]) + list(DATA_PACKAGES),
    package_dir=DATA_PACKAGES,
    package_data={"embstab": ["py.typed"], "embstab.kernels": ["*.cu", "*.cuh"],
                  "embstab.pipelines": ["*.yaml", "*.md"]},
)
