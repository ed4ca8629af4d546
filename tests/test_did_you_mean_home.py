"""One did-you-mean: every name hint comes from :func:`embstab.errors.did_you_mean` / ``lookup``."""

from __future__ import annotations

import ast
from pathlib import Path

from embstab.errors import UnknownNameError, did_you_mean, lookup

ROOT = Path(__file__).resolve().parents[1] / "embstab"


def test_only_embstab_errors_suggests_names():
    # one did-you-mean: every hint comes from embstab.errors.did_you_mean / lookup
    offenders = []
    for path in ROOT.rglob("*.py"):
        if path == ROOT / "errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import) and any(a.name == "difflib" for a in node.names) or \
                    isinstance(node, ast.ImportFrom) and node.module == "difflib":
                offenders.append(str(path.relative_to(ROOT)))
        if "get_close_matches" in path.read_text():
            offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


def test_the_one_helper_suggests_and_stays_quiet():
    assert did_you_mean("knnn", ["knn", "pip_loss"]) == " (did you mean 'knn'?)"
    assert did_you_mean("zzzz", ["knn", "pip_loss"]) == ""
    try:
        lookup({"knn": 1}, "knm", "measure")
    except UnknownNameError as exc:
        assert "did you mean 'knn'" in str(exc) and "choose from: knn" in str(exc)
    else:
        raise AssertionError("lookup accepted an unknown name")


def test_the_suggestion_ignores_case():
    # a capitalised model name must be matched to its lower-case key, not to another name
    from embstab.errors import did_you_mean

    assert did_you_mean("TransEE", ["distmult", "transe", "transr"]) == " (did you mean 'transe'?)"
    assert did_you_mean("EIS", ["eis", "knn"]) == " (did you mean 'eis'?)"
