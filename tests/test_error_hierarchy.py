"""One small error hierarchy: every exception of embstab is an EmbstabError of one documented kind."""

from __future__ import annotations

import ast
import importlib
import pickle
from pathlib import Path

import pytest

from embstab import errors
from embstab.errors import KINDS, EmbstabError

ROOT = Path(__file__).resolve().parents[1] / "embstab"

# Classes that are not yet of one kind, by name, so that the list can only shrink (a new class
# outside the kinds fails below). Empty: every class is of a kind.
NOT_YET_A_KIND: set[str] = set()

# Before the hierarchy there were 42 exception classes in 24 files; renames of a kind are now
# aliases, so a new class must be a real new kind of mistake (raise this bound only for one).
MAX_CLASSES = 38


def _exception_classes() -> dict[str, type]:
    """Every exception class defined in embstab, by ``module.Name`` (found statically, then imported)."""
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        tree = ast.parse(path.read_text())
        names = [n.name for n in tree.body if isinstance(n, ast.ClassDef) and n.bases]
        if not names:
            continue
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        mod = importlib.import_module(module)
        for name in names:
            cls = getattr(mod, name)
            if isinstance(cls, type) and issubclass(cls, BaseException):
                found[f"{module}.{name}"] = cls
    return found


CLASSES = _exception_classes()


def _kinds_of(cls: type) -> list[type]:
    """The most specific kinds ``cls`` belongs to (a kind that is a subclass of another hides it)."""
    mine = [k for k in KINDS if issubclass(cls, k)]
    return [k for k in mine if not any(o is not k and issubclass(o, k) for o in mine)]


def test_the_scan_sees_the_classes_it_should():
    # the scan itself must work: a broken one would pass everything below
    assert CLASSES["embstab.errors.EmbstabError"] is EmbstabError
    assert "embstab.study.schema.StudyDefinitionError" in CLASSES
    assert "embstab.io.modelfolder.UnsafeWeightsError" in CLASSES
    assert len(CLASSES) > 25


@pytest.mark.parametrize("name", sorted(n for n in CLASSES if n.rsplit(".", 1)[1][0] != "_"))
def test_every_public_exception_is_an_embstab_error_of_one_kind(name):
    cls = CLASSES[name]
    assert issubclass(cls, EmbstabError), name
    if cls is EmbstabError or name in NOT_YET_A_KIND:
        return
    kinds = _kinds_of(cls)
    assert len(kinds) == 1, f"{name} is of the kinds {[k.__name__ for k in kinds]}"


def test_each_kind_is_defined_once_in_embstab_errors():
    assert len(set(KINDS)) == len(KINDS)
    for kind in KINDS:
        assert kind.__module__ == "embstab.errors" and issubclass(kind, EmbstabError)
        assert kind.__name__ in errors.__all__ and kind.__name__ in errors.__doc__
    # outside embstab/errors.py, no class is a plain EmbstabError: each one names its kind
    for name, cls in CLASSES.items():
        if not name.startswith("embstab.errors.") and name not in NOT_YET_A_KIND and name[0] != "_":
            assert EmbstabError not in cls.__bases__, f"{name} subclasses EmbstabError directly, not a kind"


def test_renames_of_a_kind_are_aliases_and_keep_their_names():
    from embstab.data.errors import UnknownDatasetError
    from embstab.recipes.adasum import AdasumError
    from embstab.recipes.ocs import OCSError
    from embstab.recipes.tt import TTConfigError

    assert TTConfigError is OCSError is AdasumError is errors.ConfigError
    assert UnknownDatasetError is errors.UnknownNameError
    with pytest.raises(OCSError):
        raise TTConfigError("bad shape")


def test_class_count_does_not_grow():
    assert len(CLASSES) <= MAX_CLASSES, sorted(CLASSES)


def test_kinds_keep_the_builtin_types_callers_catch():
    assert issubclass(errors.ConfigError, ValueError) and issubclass(errors.DataFormatError, ValueError)
    assert issubclass(errors.UnknownNameError, KeyError) and issubclass(errors.DataNotFoundError, FileNotFoundError)
    assert issubclass(errors.InsufficientMemoryError, MemoryError)
    assert issubclass(errors.UntrustedSourceError, errors.DownloadError)
    from embstab.hyperbolic.errors import GraphError, HyperbolicError

    assert issubclass(GraphError, HyperbolicError) and issubclass(GraphError, ValueError)


@pytest.mark.parametrize("exc", [errors.DataFormatError("f.txt", "bad row", 3),
                                 errors.EmbeddingFormatError("e.vec", "short line"),
                                 errors.DataFormatError("the whole message")])
def test_format_errors_read_and_pickle_as_one_line(exc):
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is type(exc) and str(back) == str(exc) and "\n" not in str(exc)
    if exc.problem is not None:
        assert str(exc).startswith(exc.path) and exc.problem in str(exc)
