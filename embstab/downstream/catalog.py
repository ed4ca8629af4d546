"""What tasks and models exist (kept free of torch imports so the CLI starts fast)."""

from __future__ import annotations

from typing import Any

from embstab._numbers import is_integer
from embstab.errors import ConfigError, lookup

__all__ = ["TASKS", "MODELS", "FOLDS", "KINDS", "SEARCH_INDEXES", "register_task", "register_model",
           "default_model"]

#: The kinds of downstream task: what a model of the kind predicts and how its quality is counted.
#: Classification and tagging train a model on the frozen vectors; retrieval trains nothing (the
#: vectors themselves rank the documents).
KINDS: tuple[str, ...] = ("classification", "tagging", "retrieval")

#: Task name → (kind, description). Classification quality is accuracy; tagging quality is token
#: accuracy (or micro-F1 over non-O tokens for tasks with an outside tag).
TASKS: dict[str, tuple[str, str]] = {
    "rt_sentiment": ("classification", "Rotten Tomatoes critic snippets: fresh vs rotten"),
    "rt_subjectivity": ("classification", "Rotten Tomatoes plot synopses vs critic snippets"),
    "bbc_topic": ("classification", "BBC News articles: 5 topics"),
    "brown_pos": ("tagging", "Brown corpus part-of-speech tagging"),
}

#: Task name → folds of its k-fold evaluation when not told (tasks not listed: 1, the fixed 80/10/10
#: split). The small tasks (about 2,200 items, so 217 and 222 in a 10 % test split: one item is 0.46
#: points) are evaluated over every item; five folds rather than ten keep the default study's
#: downstream time near three times what one split cost (ten: about six times).
FOLDS: dict[str, int] = {"rt_subjectivity": 5, "bbc_topic": 5}

#: Model name → (kind, default training settings). Adam everywhere; the dev set picks the epoch.
MODELS: dict[str, tuple[str, dict[str, Any]]] = {
    # lr: the mean of frozen vectors has a small norm, so the linear model needs a larger step than
    # the recurrent ones; dev-set selection guards against the overfitting a large step invites.
    "linear": ("classification", {"lr": 1e-2, "epochs": 100, "batch_size": 32, "patience": None}),
    # a hidden layer on the same means: for features a linear layer cannot separate
    "mlp": ("classification", {"lr": 1e-3, "epochs": 100, "batch_size": 32, "patience": 10}),
    "cnn": ("classification", {"lr": 1e-3, "epochs": 10, "batch_size": 32, "patience": 3, "max_len": 400}),
    "lstm": ("classification", {"lr": 1e-3, "epochs": 10, "batch_size": 32, "patience": 3, "max_len": 400}),
    "bilstm": ("tagging", {"lr": 5e-3, "epochs": 10, "batch_size": 32, "patience": 3, "max_len": None}),
    "bilstm_crf": ("tagging", {"lr": 5e-3, "epochs": 10, "batch_size": 32, "patience": 3, "max_len": None}),
}


def _check_new(table: dict, name: Any, kind: Any, what: str) -> None:
    if not isinstance(name, str) or not name.strip() or ":" in name:
        raise ConfigError(f"a downstream {what} name must be a non-empty string without ':', got {name!r}")
    if name in table:
        raise ConfigError(f"downstream {what} {name!r} is already registered (as {table[name][0]})")
    if kind not in KINDS:
        raise ConfigError(f"downstream {what} {name!r}: kind must be one of {', '.join(KINDS)}, got {kind!r}")


def register_task(name: str, kind: str, description: str, *, folds: int | None = None) -> None:
    """Add a task to :data:`TASKS` (and its fold count to :data:`FOLDS`).

    Registering makes the name known to :func:`embstab.downstream.disagreement`, the study and the
    command line's checks; the task's data must still be loadable by name (the classification,
    tagging and retrieval loaders of :mod:`embstab.data` and :mod:`embstab.downstream.retrieval`),
    or be passed as task data.

    Parameters
    ----------
    name : str
        The task's name, new to :data:`TASKS`.
    kind : {"classification", "tagging", "retrieval"}
        The task's kind (see :data:`KINDS`).
    description : str
        One line saying what is predicted from what.
    folds : int, optional
        Folds of its k-fold evaluation when not told (trained kinds only; default: the fixed split).

    Raises
    ------
    ConfigError
        If the name is taken or malformed, the kind unknown, or ``folds`` not an integer above 1
        (or given for a retrieval task, which trains nothing).
    """
    _check_new(TASKS, name, kind, "task")
    if folds is not None and (not is_integer(folds) or folds < 2 or kind == "retrieval"):
        raise ConfigError(f"downstream task {name!r}: folds must be an integer from 2 for a trained task, "
                          f"got {folds!r} for a {kind} task")
    TASKS[name] = (kind, str(description))
    if folds is not None:
        FOLDS[name] = int(folds)


def register_model(name: str, kind: str, settings: dict[str, Any]) -> None:
    """Add a model to :data:`MODELS`: the tasks of ``kind`` can then name it.

    Parameters
    ----------
    name : str
        The model's name, new to :data:`MODELS`.
    kind : {"classification", "tagging", "retrieval"}
        The kind of task it serves.
    settings : dict
        Its default settings (each overridable by keyword in
        :func:`embstab.downstream.disagreement`).

    Raises
    ------
    ConfigError
        If the name is taken or malformed, the kind unknown or ``settings`` not a dict.
    """
    _check_new(MODELS, name, kind, "model")
    if not isinstance(settings, dict):
        raise ConfigError(f"downstream model {name!r}: settings must be a dict, got {type(settings).__name__}")
    MODELS[name] = (kind, dict(settings))


def default_model(task: str) -> str:
    """The model a task uses when none is named: the first registered model of its kind.

    ``linear`` for classification, ``bilstm`` for tagging, ``search`` for retrieval.

    Parameters
    ----------
    task : str
        A name from :data:`TASKS`.

    Returns
    -------
    str
        A name from :data:`MODELS`.

    Raises
    ------
    UnknownNameError
        If ``task`` is not registered (with the closest name).
    ConfigError
        If no model of the task's kind is registered.
    """
    kind = lookup(TASKS, task, "task")[0]
    for model, (model_kind, _) in MODELS.items():
        if model_kind == kind:
            return model
    raise ConfigError(f"no downstream model serves {kind} tasks such as {task!r}; register one")


# Retrieval: known-item search, scored by the vectors themselves (embstab.downstream.retrieval).
register_task("wiki_retrieval", "retrieval", "Wikipedia vital articles: each title finds its summary (known-item search)")
register_task("bbc_retrieval", "retrieval", "BBC News: each headline finds its article (known-item search)")
#: Where model ``search`` runs a search: ``exact`` (embstab's exhaustive search, the reference) or a
#: faiss index (``flat``, ``hnsw``, ``ivf``, ``binary``; see :mod:`embstab.downstream.retrieval`).
SEARCH_INDEXES: tuple[str, ...] = ("exact", "flat", "hnsw", "ivf", "binary")

# k: documents returned per query; batch_size: queries scored at once; index: where the search runs.
# hnsw_m, ef_construction, ef_search: the HNSW graph's links per node and candidate lists when built
# and searched (faiss's usual M and efConstruction; efSearch raised from faiss's 16 so that k = 10
# draws on several times k candidates); nlist (None: about the square root of the documents) and
# nprobe: the IVF lists and the lists searched per query.
register_model("search", "retrieval", {"k": 10, "precision": "float32", "batch_size": 256, "index": "exact",
                                       "hnsw_m": 32, "ef_construction": 40, "ef_search": 64, "nlist": None,
                                       "nprobe": 8})
