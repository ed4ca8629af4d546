"""Docstrings speak of the project, and public functions document their parameters numpy-style."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import textwrap
import typing
from pathlib import Path

import pytest

import embstab

PACKAGE = Path(__file__).resolve().parents[1] / "embstab"
# References to documents the repository does not ship, or to its issue tracker.
FOREIGN = re.compile(r"§|shared/specs|specs/\w+\.md|\bspec(ification)? \w+\.md|\bissue \d+|\bdeliverable \d+")

def _public_modules() -> list[str]:
    """Dotted names of embstab's public modules (no component starting with ``_``)."""
    names = ["embstab"] + [info.name for info in pkgutil.walk_packages(embstab.__path__, "embstab.")]
    return [name for name in names if not any(part.startswith("_") for part in name.split("."))]


def _public_callables(module: str) -> list[tuple[str, object]]:
    """(name, function) for the functions in ``module.__all__`` defined there, and the public methods
    (not dunder, not ``_``-prefixed) defined in the body of the classes in ``__all__`` defined there."""
    mod = importlib.import_module(module)
    found = []
    for name in getattr(mod, "__all__", []):
        obj = getattr(mod, name)
        if getattr(obj, "__module__", None) != module:
            continue
        if inspect.isfunction(obj):
            found.append((name, obj))
        elif inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if attr.startswith("_"):
                    continue
                if isinstance(member, (classmethod, staticmethod)):
                    member = member.__func__
                if inspect.isfunction(member):
                    found.append((f"{name}.{attr}", member))
    return found


def _returns_value(func) -> bool:
    """Whether ``func`` gives back something other than None: its return annotation when it has one,
    otherwise a ``return <value>`` or ``yield`` in its own body (nested functions not counted)."""
    annotation = inspect.signature(func).return_annotation
    if annotation is not inspect.Signature.empty:
        return annotation not in (None, "None", "NoReturn", typing.NoReturn, "typing.NoReturn")
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError, SyntaxError):
        return False
    stack = list(tree.body[0].body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Return) and node.value is not None and not (
                isinstance(node.value, ast.Constant) and node.value.value is None):
            return True
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            return True
        stack.extend(ast.iter_child_nodes(node))
    return False


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


@pytest.mark.parametrize("module", _public_modules())
def test_public_functions_and_methods_are_documented_numpy_style(module):
    missing = []
    for name, func in _public_callables(module):
        doc = inspect.getdoc(func) or ""
        params = [p for p in inspect.signature(func).parameters.values() if p.name not in ("self", "cls")]
        if params and "Parameters\n----------" not in doc:
            missing.append(f"{name} (Parameters)")
        if _returns_value(func) and "Returns\n-------" not in doc and "Yields\n------" not in doc:
            missing.append(f"{name} (Returns)")
    assert missing == [], f"{module}: no numpy-style section in {missing}"
