"""CUDA kernel sources shipped with embstab, compiled at run time (NVRTC through cupy).

Read them with ``importlib.resources.files("embstab.kernels")``.
"""
