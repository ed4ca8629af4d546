"""Kind-specific study settings: a default and the values accepted, and the downstream tasks of a kind.

A leaf module (standard library only), so each kind's module and the kind registry can share these
descriptions without importing each other.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Setting", "TaskRule"]


@dataclass(frozen=True)
class Setting:
    """One kind-specific study setting: its default and the values it accepts.

    Attributes
    ----------
    default : Any
        Value when the key is absent.
    type : str
        ``"int"``, ``"float"``, ``"choice"`` or ``"any"`` (passed through; the consumer checks it).
    low, high : float, optional
        Inclusive bounds of an ``int`` or ``float``.
    choices : tuple
        Accepted values of a ``choice``.
    nullable : bool
        Whether ``null`` is accepted (meaning "no limit" / "all").
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
            ``value``, checked against the type and bounds (None when null is accepted).

        Raises
        ------
        StudyDefinitionError
            A value of the wrong type, outside the bounds or not one of the choices.
        """
        if value is None and self.nullable:
            return None
        if self.type == "int":
            return v.integer(value, key, None if self.low is None else int(self.low),
                             None if self.high is None else int(self.high))
        if self.type == "float":
            return v.number(value, key, float("-inf") if self.low is None else self.low,
                            float("inf") if self.high is None else self.high)
        if self.type == "choice":
            if value not in self.choices:
                near = difflib.get_close_matches(str(value), [str(c) for c in self.choices], n=1)
                hint = f"; did you mean '{near[0]}'?" if near else ""
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
    """

    models: tuple[str, ...]
    options: dict[str, Setting] = field(default_factory=dict)
