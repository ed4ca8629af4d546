"""Sphinx configuration: the API reference, generated from embstab's numpy-style docstrings."""

from __future__ import annotations

import embstab

project = "embstab"
author = "The embstab developers"
release = embstab.__version__
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.viewcode"]
napoleon_numpy_docstring = True
napoleon_google_docstring = False
napoleon_use_rtype = False
# "Attributes" sections as fields of the class, so dataclass fields are not described twice
napoleon_use_ivar = True
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": True}
autodoc_typehints = "description"
autodoc_member_order = "bysource"
# optional packages that a documentation build need not have
autodoc_mock_imports = ["cupy"]
suppress_warnings = ["ref.python"]
html_theme = "alabaster"
exclude_patterns = ["_build"]
