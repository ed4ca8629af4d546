"""Every notebook in notebooks/ is run by a test of tests/test_notebooks.py (a new one cannot rot unseen)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _run_calls() -> dict[str, list[str]]:
    """Per test function of test_notebooks.py: the notebooks it runs and its pytest marks."""
    tree = ast.parse((REPO / "tests" / "test_notebooks.py").read_text(encoding="utf-8"))
    found = {}
    for node in tree.body:
        if not (isinstance(node, ast.FunctionDef) and node.name.startswith("test_")):
            continue
        names = [call.args[0].value for call in ast.walk(node)
                 if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "run"
                 and call.args and isinstance(call.args[0], ast.Constant)]
        for name in names:
            found[name] = [ast.unparse(d) for d in node.decorator_list]
    return found


def test_every_notebook_is_run_by_a_test():
    notebooks = sorted(p.name for p in (REPO / "notebooks").glob("*.ipynb"))
    assert notebooks, "no notebooks found"
    runs = _run_calls()
    assert sorted(set(notebooks) - set(runs)) == []
    assert sorted(set(runs) - set(notebooks)) == []  # and no test runs a notebook that is gone

