"""Pair sources: who computes the downstream disagreement of two specs (files, folders, model names).

:func:`pair_disagreement` is the one entry point of ``embstab downstream OLD NEW --task TASK``:
the first registered source that claims OLD or NEW for the task computes the result, and the
word-embedding source (embedding files or ``builtin:NAME`` loaded with :func:`embstab.io.load`,
then :func:`~embstab.downstream.disagreement` or :func:`~embstab.downstream.seed_baseline`) takes
every pair that no other source claims. An embedding kind adds its own source with
:func:`register_pair_source` from its package (the knowledge-graph kind claims ``TASK:GRAPH``
tasks and its model folders, the contextual kind its models on retrieval tasks); the kinds are
loaded (:data:`embstab.kinds.KINDS`) before the first dispatch, so none of them is named here.

A source's options are the keyword-only parameters of its ``run``; an option given to a source
that does not take it is refused in one line naming it and the sources that do take it.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from embstab.errors import ConfigError, lookup

__all__ = ["PairSource", "WORD_SOURCE", "register_pair_source", "unregister_pair_source", "pair_sources",
           "pair_source_for", "pair_disagreement", "refuse_training_options"]

#: The options of the trained tasks that a retrieval task (which trains nothing) has no use for.
TRAINING_OPTIONS = ("epochs", "lr", "recipe", "folds")
#: The options of the retrieval tasks that a trained task has no use for.
RETRIEVAL_OPTIONS = ("k", "index", "precision", "new_precision")


@dataclass(frozen=True)
class PairSource:
    """A source of downstream pairs: which specs it claims and how it computes their disagreement.

    Attributes
    ----------
    name : str
        The source's name in the registry.
    claims : callable
        ``claims(spec, task) -> bool``: whether this source handles a pair with a member ``spec``
        (OLD, then NEW) on ``task``.
    run : callable
        ``run(old, new, task, *, progress=False, **options)``: the result object (with
        ``to_dict()``); ``new`` is None for a seed baseline.
    label : str
        What the source compares, for messages (``"KG tasks (TASK:GRAPH)"``).
    members : str
        What OLD and NEW are, plural, for messages (``"KG model folders"``).
    check : callable or None
        ``check(old, new, task, options, name)``: raises :class:`~embstab.errors.ConfigError` for
        options that do not fit this task, before the generic checks; ``name(option)`` is how a
        message names an option.
    options : frozenset of str
        The options ``run`` takes (its keyword-only parameters, less ``progress``).
    """

    name: str
    claims: Callable[[str, str], bool]
    run: Callable[..., Any]
    label: str
    members: str
    check: Callable[..., None] | None = None
    options: frozenset[str] = frozenset()


def _options_of(run: Callable[..., Any]) -> frozenset[str]:
    params = inspect.signature(run).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        raise ConfigError(f"a pair source's run must name its options, not take **{run.__name__} keywords")
    return frozenset(p.name for p in params if p.kind is p.KEYWORD_ONLY and p.name != "progress")


_SOURCES: dict[str, PairSource] = {}
_LOCK = threading.RLock()


def register_pair_source(name: str, claims: Callable[[str, str], bool], run: Callable[..., Any], *,
                         label: str | None = None, members: str = "members",
                         check: Callable[..., None] | None = None) -> PairSource:
    """Add a source of downstream pairs to the ones :func:`pair_disagreement` asks.

    Registering a name again replaces its source (a module imported again registers again).

    Parameters
    ----------
    name : str
        The source's name (``"kg"``, ``"contextual"``).
    claims : callable
        ``claims(spec, task) -> bool``: whether a pair with member ``spec`` (OLD, then NEW) on
        ``task`` is this source's. Called for each member, so it should be cheap and not raise.
    run : callable
        ``run(old, new, task, *, progress=False, OPTION=default, ...)`` returning the result object
        (with ``to_dict()``); ``new`` is None for a seed baseline. Its keyword-only parameters are
        the options the source takes; it must not take ``**kwargs``.
    label : str, optional
        What the source compares, for messages (default ``name``).
    members : str
        What OLD and NEW are, plural, for messages (``"KG model folders"``).
    check : callable, optional
        ``check(old, new, task, options, name)``, raising :class:`~embstab.errors.ConfigError` for
        given options (a dict of those not None/False) that do not fit ``task``; ``name(option)``
        is how messages name an option (a flag on the command line).

    Returns
    -------
    PairSource
        The registered source.

    Raises
    ------
    ConfigError
        If ``name`` is the built-in word-embedding source's or ``run`` takes ``**kwargs``.
    """
    if name == WORD_SOURCE.name:
        raise ConfigError(f"pair source {name!r} is the built-in word-embedding source, which takes what no "
                          "other source claims; register under another name")
    source = PairSource(name, claims, run, label or name, members, check, _options_of(run))
    with _LOCK:
        _SOURCES[name] = source
    return source


def unregister_pair_source(name: str) -> PairSource:
    """Take a source out of the ones :func:`pair_disagreement` asks (undoes :func:`register_pair_source`).

    Parameters
    ----------
    name : str
        The source's name.

    Returns
    -------
    PairSource
        The source taken out.

    Raises
    ------
    UnknownNameError
        If no source of that name is registered (the word-embedding source is never).
    """
    with _LOCK:
        lookup(_SOURCES, name, "pair source")
        return _SOURCES.pop(name)


def pair_sources() -> dict[str, PairSource]:
    """Every pair source, in the order they are asked: the registered ones, then the word-embedding source.

    The embedding kinds (:data:`embstab.kinds.KINDS`) are loaded first, so their sources are there.

    Returns
    -------
    dict of str to PairSource
        Name → source; a copy.
    """
    from embstab.kinds import KINDS  # noqa: PLC0415  # reading the registry imports the kinds, which register

    len(KINDS)
    with _LOCK:
        return {**_SOURCES, WORD_SOURCE.name: WORD_SOURCE}


def pair_source_for(old: str, new: str | None, task: str) -> PairSource:
    """The source that computes the disagreement of ``old`` and ``new`` on ``task``.

    Parameters
    ----------
    old : str
        The old member's spec (a file, a folder, ``builtin:NAME``...).
    new : str or None
        The new member's spec (None for a seed baseline).
    task : str
        The downstream task (``rt_sentiment``, ``link_prediction:umls``...).

    Returns
    -------
    PairSource
        The first registered source that claims OLD or NEW for ``task``, else the word-embedding source.
    """
    specs = [s for s in (old, new) if s is not None]
    for source in pair_sources().values():
        if source is not WORD_SOURCE and any(source.claims(s, task) for s in specs):
            return source
    return WORD_SOURCE


def pair_disagreement(old: str, new: str | None = None, task: str = "rt_sentiment", *, model: str | None = None,
                      seed: int | None = None, seed_baseline: bool = False, progress: bool = False,
                      option_names: Mapping[str, str] | None = None, **options: Any) -> Any:
    """The downstream disagreement of two members named by spec, computed by the source that claims them.

    Every registered source (:func:`register_pair_source`: the knowledge-graph kind's for
    ``TASK:GRAPH`` tasks and its model folders, the contextual kind's for its models on retrieval
    tasks) is asked in turn whether it claims OLD or NEW for ``task``; the word-embedding source
    takes what none claims: two embedding files or ``builtin:NAME`` embeddings, a task model trained
    on each (:func:`embstab.downstream.disagreement`), or OLD alone with two seeds
    (:func:`embstab.downstream.seed_baseline`).

    Parameters
    ----------
    old : str
        The old member: an embedding file or ``builtin:NAME``, or what a registered source claims
        (a KG model folder, a contextual model).
    new : str, optional
        The new member; None with ``seed_baseline``.
    task : str, default "rt_sentiment"
        A task of :data:`embstab.downstream.TASKS`, or a task a registered source claims
        (``link_prediction:GRAPH``).
    model : str, optional
        The task model (word-embedding tasks; default per task).
    seed : int, optional
        The models' seed (default 0); for KG triple classification the negatives' seed.
    seed_baseline : bool
        Compare OLD with itself under seeds ``seed`` and ``seed + 1000`` (``new`` must be None).
    progress : bool
        Show progress bars.
    option_names : mapping of str to str, optional
        How messages name each option (the command line passes its flags, ``{"k": "--k"}``);
        default the keyword itself.
    **options
        The source's own options, e.g. ``limit``, ``epochs``, ``lr``, ``batch_size``, ``recipe``,
        ``folds``, ``min_coverage``, ``trust_pickle`` (word tasks), ``k``, ``index``,
        ``precision``, ``new_precision`` (retrieval tasks), ``bits`` (KG tasks). None (False for a
        switch) is the same as leaving an option out.

    Returns
    -------
    object
        The source's result object, with ``to_dict()``: a
        :class:`~embstab.downstream.DisagreementResult` for word-embedding and retrieval tasks,
        the KG kind's result for ``TASK:GRAPH`` tasks.

    Raises
    ------
    ConfigError
        For an option the claiming source does not take or that does not fit the task (one line
        naming the option and the sources that take it), or OLD/NEW and ``seed_baseline`` that do
        not match.
    EmbstabError
        As the source raises it, for members that do not load or a task that does not run.
    """
    given = {k: v for k, v in dict(options, model=model, seed=seed, seed_baseline=seed_baseline).items()
             if v is not None and v is not False}
    names = dict(option_names or {})

    def name(option: str) -> str:
        return names.get(option, option)

    source = pair_source_for(old, new, task)
    if source.check is not None:
        source.check(old, new, task, given, name)
    for option in given:
        if option not in source.options:
            raise ConfigError(_refusal(option, source, name))
    if (new is None) != bool(seed_baseline):  # two members, or one with a seed baseline
        if "seed_baseline" in source.options:
            raise ConfigError(f"give two {source.members} OLD NEW, or one with {name('seed_baseline')}")
        raise ConfigError(f"{task} compares two {source.members}: give OLD and NEW")
    return source.run(old, new, task, progress=progress, **given)


def _refusal(option: str, source: PairSource, name: Callable[[str], str]) -> str:
    """One line: ``option`` is not ``source``'s, and which sources take it."""
    sources = pair_sources()
    # the word-embedding source first: the built-in one, then the kinds in their order
    takers = [s.label for s in (WORD_SOURCE, *sources.values()) if option in s.options and s is not source]
    takers = list(dict.fromkeys(takers))
    if not takers:
        every = sorted({o for s in sources.values() for o in s.options})
        return f"unknown option {name(option)}: the pair sources take {', '.join(every)}"
    return f"{name(option)} applies to {' and '.join(takers)}, not to {source.label}"


def refuse_training_options(task: str, options: Mapping[str, Any], name: Callable[[str], str]) -> None:
    """Refuse the options of trained tasks for a retrieval task, and those of retrieval tasks for a trained task.

    A check for :func:`register_pair_source` (the word-embedding source's, and the contextual
    kind's for its retrieval tasks).

    Parameters
    ----------
    task : str
        A task of :data:`embstab.downstream.TASKS` (any other is left alone).
    options : mapping
        The given options.
    name : callable
        How a message names an option.

    Raises
    ------
    ConfigError
        For ``epochs``, ``lr``, ``recipe`` or ``folds`` with a retrieval task, or ``k``, ``index``,
        ``precision`` or ``new_precision`` with a trained task.
    """
    from embstab.downstream.catalog import TASKS  # noqa: PLC0415

    if task not in TASKS:
        return
    if TASKS[task][0] == "retrieval":
        for option in TRAINING_OPTIONS:
            if option in options:
                raise ConfigError(f"{name(option)} applies to trained tasks; {task} trains nothing (the vectors "
                                  "rank the documents)")
        return
    retrieval = ", ".join(t for t, (kind, _) in TASKS.items() if kind == "retrieval")
    for option in RETRIEVAL_OPTIONS:
        if option in options:
            raise ConfigError(f"{name(option)} applies to retrieval tasks ({retrieval}), not to {task}")


# --- the built-in word-embedding source ---------------------------------------------------------------

def _check_word_pair(old: str, new: str | None, task: str, options: Mapping[str, Any],
                     name: Callable[[str], str]) -> None:
    refuse_training_options(task, options, name)
    if "new_precision" in options or options.get("precision", "float32") not in ("float32", "binary"):
        raise ConfigError(f"a word embedding is searched at {name('precision')} float32 or binary, the same for both; "
                          f"{name('new_precision')} and int8/uint8 apply to contextual models")


def _run_word_pair(old: str, new: str | None, task: str, *, model: str | None = None, seed: int = 0,
                   seed_baseline: bool = False, limit: int | None = None, epochs: int | None = None,
                   lr: float | None = None, batch_size: int | None = None, recipe: str | None = None,
                   folds: int | None = None, k: int | None = None, index: str | None = None,
                   precision: str | None = None, min_coverage: float | None = None, trust_pickle: bool = False,
                   progress: bool = False) -> Any:
    # the training code imports torch: only when a word pair runs
    from embstab.downstream.api import MIN_COVERAGE, disagreement  # noqa: PLC0415
    from embstab.downstream.api import seed_baseline as seed_pair  # noqa: PLC0415
    from embstab.downstream.catalog import default_model  # noqa: PLC0415
    from embstab.io import load  # noqa: PLC0415

    settings = {k_: v for k_, v in (("epochs", epochs), ("lr", lr), ("batch_size", batch_size), ("recipe", recipe),
                                    ("folds", folds), ("k", k), ("index", index), ("precision", precision))
                if v is not None}
    settings["min_coverage"] = MIN_COVERAGE if min_coverage is None else min_coverage
    model = model or default_model(task)
    a = load(old, trust_pickle=trust_pickle)
    if seed_baseline:
        return seed_pair(a, task, model, seed, limit=limit, progress=progress, **settings)
    return disagreement(a, load(new, trust_pickle=trust_pickle), task, model, seed, limit=limit, progress=progress,
                        **settings)


#: The source of every pair no registered source claims: embedding files or ``builtin:NAME``
#: embeddings (:func:`embstab.io.load`), a task model trained on each (or a search).
WORD_SOURCE = PairSource("word", lambda spec, task: True, _run_word_pair, "word-embedding tasks", "embeddings",
                         _check_word_pair, _options_of(_run_word_pair))
