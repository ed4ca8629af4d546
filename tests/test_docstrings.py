"""Docstrings speak of the project, and public functions document their parameters numpy-style."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "embstab"
# References to documents the repository does not ship, or to its issue tracker.
FOREIGN = re.compile(r"§|shared/specs|specs/\w+\.md|\bspec(ification)? \w+\.md|\bissue \d+|\bdeliverable \d+")

#: Modules whose public functions must all carry a numpy-style "Parameters" section.
NUMPYDOC_MODULES = [
    "embstab.errors", "embstab.data.pretrained", "embstab.selection.recommend", "embstab.study.runner",
    "embstab.downstream.api", "embstab.recipes.registry", "embstab.compress.transforms",
    "embstab.recipes.training",
    "embstab.hyperbolic.manifolds", "embstab.hyperbolic.embed", "embstab.hyperbolic.io", "embstab.hyperbolic.metrics",
    "embstab.hyperbolic.stability", "embstab.measures.hyperbolic",
    "embstab.study.kinds", "embstab.study.kind_kg", "embstab.study.kind_contextual", "embstab.study.settings",
]


def _docstrings(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                yield getattr(node, "name", path.name), doc


def test_no_docstring_cites_specs_or_issues():
    offenders = [f"{path.relative_to(PACKAGE.parent)}:{name}: {FOREIGN.search(doc).group(0)!r}"
                 for path in sorted(PACKAGE.rglob("*.py")) for name, doc in _docstrings(path)
                 if FOREIGN.search(doc)]
    assert offenders == []


@pytest.mark.parametrize("module", NUMPYDOC_MODULES)
def test_public_functions_document_their_parameters(module):
    mod = importlib.import_module(module)
    missing = []
    for name in getattr(mod, "__all__", []):
        obj = getattr(mod, name)
        if not inspect.isfunction(obj) or obj.__module__ != module:
            continue
        params = [p for p in inspect.signature(obj).parameters.values() if p.name not in ("self", "cls")]
        doc = inspect.getdoc(obj) or ""
        if params and "Parameters\n----------" not in doc:
            missing.append(name)
    assert missing == [], f"{module}: no numpy-style Parameters section in {missing}"
