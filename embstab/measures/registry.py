"""Registry of measures: what each computes, its direction, range, invariances and needs.

Every measure is one :class:`MeasureInfo`, registered by :func:`register_measure`; its properties
(direction, geometry, whether it needs more words than dimensions, default parameters, fallback
rank) are read from here by :func:`embstab.compare`, the study schema and the selection. The
built-in measures are declared in one catalogue that imports no measure code (the command line
reads its names from it) and registered here on import.

Analyses need every measure as a distance ("larger = less stable"); :meth:`MeasureInfo.to_distance`
turns similarities such as k-NN overlap into ``1 − value``.
"""

from __future__ import annotations

import dataclasses
import math

from embstab._measure_catalogue import BUILTIN_MEASURES, DEFAULT_MEASURES, GEOMETRIES, MeasureInfo
from embstab.errors import ConfigError, lookup

__all__ = ["MeasureInfo", "GEOMETRIES", "REGISTRY", "get_measure", "DEFAULT_MEASURES", "measures_for", "register_measure",
           "unregister_measure", "fallback_order"]

#: Every registered measure by name, in registration order (the built-in ones first).
REGISTRY: dict[str, MeasureInfo] = {}


def register_measure(info: MeasureInfo, *, replace: bool = False) -> MeasureInfo:
    """Register a measure under ``info.name``, after checking its declaration.

    Parameters
    ----------
    info : MeasureInfo
        The measure and all its properties; a ``func`` given as ``"module:function"`` is imported.
    replace : bool, default False
        Allow replacing a measure registered under the same name.

    Returns
    -------
    MeasureInfo
        The registered entry (with its function imported).

    Raises
    ------
    ConfigError
        If the name is taken (without ``replace``) or not an identifier, the geometry unknown, the
        range empty, a default not a parameter of the function (or an anchored measure without a
        default ``alpha``), or the fallback rank not a positive integer or already another measure's.
    """
    if not isinstance(info, MeasureInfo):
        raise ConfigError(f"register_measure takes a MeasureInfo, got {type(info).__name__}")
    name = info.name
    if not isinstance(name, str) or not name.isidentifier():
        raise ConfigError(f"a measure name must be an identifier (it names result columns), got {name!r}")
    if name in REGISTRY and not replace:
        raise ConfigError(f"measure {name!r} is already registered; pass replace=True to replace it")
    info = dataclasses.replace(info, func=info.function(), range=tuple(info.range),
                               invariances=tuple(info.invariances), defaults=dict(info.defaults))
    _check_declaration(info)
    REGISTRY[name] = info
    return info


def _check_declaration(info: MeasureInfo) -> None:
    """Refuse a declaration whose properties contradict each other or its function."""
    where = f"measure {info.name!r}"
    if info.geometry not in GEOMETRIES:
        raise ConfigError(f"{where}: geometry must be one of {', '.join(GEOMETRIES)}, got {info.geometry!r}")
    low, high = info.range
    if math.isnan(low) or math.isnan(high) or not low < high:
        raise ConfigError(f"{where}: range must be (low, high) with low < high, got {info.range!r}")
    if info.larger_is_more_stable and not math.isfinite(high):
        raise ConfigError(f"{where}: a similarity needs a finite upper end (its distance is high − value)")
    if info.needs_anchors and "alpha" not in info.defaults:
        raise ConfigError(f"{where}: a measure with anchors needs a default 'alpha' (the exponent the anchors "
                          "are factored with)")
    unknown = sorted(set(info.defaults) - set(info.parameters))
    if unknown:
        raise ConfigError(f"{where}: defaults {', '.join(unknown)} are not parameters of its function "
                          f"(it takes: {', '.join(info.parameters) or 'none'})")
    rank = info.fallback_rank
    if rank is not None:
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
            raise ConfigError(f"{where}: fallback_rank must be a positive integer or None, got {rank!r}")
        taken = [n for n, m in REGISTRY.items() if m.fallback_rank == rank and n != info.name]
        if taken:
            raise ConfigError(f"{where}: fallback_rank {rank} is already {taken[0]}'s")


def unregister_measure(name: str) -> MeasureInfo:
    """Remove a registered measure (a test's own measure, for one).

    Parameters
    ----------
    name : str
        A key of :data:`REGISTRY`.

    Returns
    -------
    MeasureInfo
        The entry removed.

    Raises
    ------
    UnknownNameError
        If no measure has that name.
    """
    info = get_measure(name)
    del REGISTRY[name]
    return info


def measures_for(geometry: str) -> tuple[str, ...]:
    """Names of the registered measures that compare embeddings of ``geometry``, in registry order.

    Parameters
    ----------
    geometry : str
        ``"euclidean"`` or ``"hyperbolic"``.

    Returns
    -------
    tuple of str
    """
    return tuple(name for name, info in REGISTRY.items() if info.geometry == geometry)


def fallback_order() -> tuple[str, ...]:
    """Names of the registered measures with a fallback rank, first rank first.

    Returns
    -------
    tuple of str
        The measures a recommendation turns to, in this order, when the one asked for shows no signal.
    """
    ranked = [info for info in REGISTRY.values() if info.fallback_rank is not None]
    return tuple(info.name for info in sorted(ranked, key=lambda info: info.fallback_rank))


def get_measure(name: str) -> MeasureInfo:
    """The :class:`MeasureInfo` registered under ``name``.

    Parameters
    ----------
    name : str
        A key of :data:`REGISTRY`.

    Returns
    -------
    MeasureInfo

    Raises
    ------
    UnknownNameError
        If no measure has that name (the message suggests the closest).
    """
    return lookup(REGISTRY, name, "measure")


for _declared in BUILTIN_MEASURES:
    register_measure(_declared)
del _declared
