"""Kind-specific study settings: a default and the values accepted, the downstream tasks of a kind,
and the configuration layout every kind shares.

A leaf module (standard library only), so each kind's module and the kind registry can share these
descriptions without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from embstab.errors import did_you_mean

__all__ = ["Setting", "TaskRule", "PLAN_VERSION", "REFERENCE_RECIPE", "source_config", "member_config"]

#: Bumped when the meaning of a configuration changes, so old artifacts are not reused.
PLAN_VERSION = 1
#: The training recipe of the anchors (and the recipe axis' default).
REFERENCE_RECIPE = "fp32"


@dataclass(frozen=True)
class Setting:
    """One kind-specific study setting: its default and the values it accepts.

    Attributes
    ----------
    default : Any
        Value when the key is absent.
    type : str
        ``"int"``, ``"float"``, ``"choice"``, ``"mapping"`` (a mapping of the settings in
        ``fields``, held as sorted ``(name, value)`` pairs) or ``"any"`` (passed through; the
        consumer checks it).
    low, high : float, optional
        Inclusive bounds of an ``int`` or ``float``.
    choices : tuple
        Accepted values of a ``choice``.
    nullable : bool
        Whether ``null`` is accepted (meaning "no limit" / "all").
    fields : tuple of (str, Setting)
        The settings of a ``mapping``, each with its default.
    optional : bool
        Left out of the study's configuration (and fingerprint) when absent or null, so that
        adding the setting changes no existing study.
    omit_default : bool
        Leave the setting out of the study's configuration while it holds its default, so that
        adding it changes neither older studies' fingerprints nor their artifacts' names.
    """

    default: Any
    type: str = "any"
    low: float | None = None
    high: float | None = None
    choices: tuple[Any, ...] = ()
    nullable: bool = False
    fields: tuple[tuple[str, Setting], ...] = ()
    optional: bool = False
    omit_default: bool = False

    def check(self, v: Any, value: Any, key: str) -> Any:
        """The validated value; ``v`` is the schema's validator (its ``fail`` names ``key``).

        Parameters
        ----------
        v : validator
            The schema's validator (its ``fail`` builds the error naming ``key``).
        value : Any
            The value as read from the study file.
        key : str
            Its key in the study file, for the error message.

        Returns
        -------
        Any
            ``value``, checked against the type and bounds (None when null is accepted; a mapping's
            settings as sorted ``(name, value)`` pairs, defaults filled in).

        Raises
        ------
        StudyDefinitionError
            A value of the wrong type, outside the bounds or not one of the choices, or a mapping with
            an unknown key (naming the key of the bad value).
        """
        if value is None and self.nullable:
            return None
        if self.type == "int":
            return v.integer(value, key, None if self.low is None else int(self.low),
                             None if self.high is None else int(self.high))
        if self.type == "float":
            return v.number(value, key, float("-inf") if self.low is None else self.low,
                            float("inf") if self.high is None else self.high)
        if self.type == "mapping":
            given = v.mapping({} if value is None else value, key, dict.fromkeys(dict(self.fields), False))
            return tuple(sorted((name, s.check(v, given.get(name, s.default), f"{key}.{name}"))
                                for name, s in self.fields))
        if self.type == "choice":
            if value not in self.choices:
                hint = did_you_mean(str(value), [str(c) for c in self.choices])
                raise v.fail(key, f"unknown value {value!r} (choose from {', '.join(map(str, self.choices))}){hint}")
            return value
        return value


@dataclass(frozen=True)
class TaskRule:
    """A downstream task a kind accepts.

    Attributes
    ----------
    models : tuple of str
        The models (or decision rules) the task can use; the first is the default.
    options : dict
        Option name → :class:`Setting` an entry's ``options`` may set.
    model_options : dict
        Model → further options an entry with that model may set (a model's own constructor
        arguments); empty when every model takes the same options.
    """

    models: tuple[str, ...]
    options: dict[str, Setting] = field(default_factory=dict)
    model_options: dict[str, dict[str, Setting]] = field(default_factory=dict)


def source_config(stage: str, section: Any, **extra: Any) -> dict[str, Any]:
    """The source pair's configuration, which every other configuration of a study nests.

    Parameters
    ----------
    stage : str
        The stage that builds the source pair (``corpus``, ``graph``...).
    section : dataclass
        The parsed source section of the study (its fields are the configuration's).
    **extra
        Further entries (a kind's marker, settings that shape the pair), after the section's.

    Returns
    -------
    dict
        Plan version, embstab version, stage, the section's fields, then ``extra``.
    """
    from dataclasses import asdict  # noqa: PLC0415

    # the embstab version is part of it, so a new release never reuses older artifacts
    import embstab  # noqa: PLC0415 - at call time: embstab/__init__ may itself import this module

    return {"v": PLAN_VERSION, "embstab": embstab.__version__, "stage": stage, **asdict(section), **extra}


def member_config(spec: Any, side: str, v: Any, source: dict[str, Any]) -> dict[str, Any]:
    """One member's training configuration for a kind whose settings are all ``training.params``.

    Parameters
    ----------
    spec : StudySpec
        The study.
    side : str
        ``old`` or ``new``.
    v : Variant
        The grid point (algorithm, seed, dimension...).
    source : dict
        The source pair's configuration.

    Returns
    -------
    dict
        Plan version, stage, the kind (it marks a member whose compressed table states its own
        memory per row), the source, side, algorithm, dimension, seed and the kind's settings.
    """
    return {"v": PLAN_VERSION, "stage": "train", "kind": spec.kind, "source": source, "side": side,
            "algo": v.algo, "dim": v.dim, "seed": v.seed, **spec.training.params_dict()}
