"""``Pair``: the old and the new member of a retrained pair, named so their order cannot be mixed up.

Every pair API of embstab takes the old member first (or a ``Pair``); the pair protocol (the
quantization clips, the rotation the new member is aligned by, the outlier-channel splits) always
comes from the old member.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, NamedTuple, TypeVar

__all__ = ["MISSING", "Pair", "unpack_pair"]

T = TypeVar("T")
U = TypeVar("U")


class Pair(NamedTuple, Generic[T]):
    """The old and the new member of a pair: embeddings, KG models, contextual model folders...

    A tuple ``(old, new)``, so ``old, new = pair`` unpacks it in that order.

    Attributes
    ----------
    old : T
        The member trained first (the reference whose protocol the pair follows).
    new : T
        The retrained member.
    """

    old: T
    new: T

    def map(self, fn: Callable[[T], U]) -> Pair[U]:
        """The pair of ``fn(old)`` and ``fn(new)``, e.g. ``Pair(old_dir, new_dir).map(load)``.

        Parameters
        ----------
        fn : callable
            Applied to each member, old first.

        Returns
        -------
        Pair
        """
        return Pair(fn(self.old), fn(self.new))


def unpack_pair(old: Any, new: Any, rest: tuple[Any, ...] = (), defaults: tuple[Any, ...] = ()
                ) -> tuple[Any, Any, tuple[Any, ...]]:
    """The members and the other positional arguments of ``f(old, new, *rest)`` or ``f(Pair(old, new), *rest)``.

    A pair API takes either two members or one :class:`Pair`; with a ``Pair`` first, every later
    positional argument sits one slot to the left, so the values are shifted back to their names
    (arguments given by keyword stay where they are).
    The slots after ``new`` default to :data:`MISSING` in such an API's signature; ``defaults``
    gives their real defaults (:data:`MISSING` for a required one).

    Parameters
    ----------
    old : Pair or member
        The old member, or a Pair.
    new : member, MISSING, or the first of ``rest`` when ``old`` is a Pair
    rest : tuple
        The values in the positional slots after ``new``.
    defaults : tuple
        The default of each slot of ``rest``.

    Returns
    -------
    (old, new, rest)
        The two members and the values of the slots after ``new``, defaults filled in.

    Raises
    ------
    TypeError
        If a member or a required argument is missing, or a Pair comes with too many positional
        arguments.
    """
    if isinstance(old, Pair):
        if new is not MISSING:
            # the positional values are ``new`` and the run of given slots after it (keywords fill
            # later slots): each moves one slot to the right, into the first slot left empty
            k = next((i for i, v in enumerate(rest) if v is MISSING), None)
            if k is None:
                raise TypeError("too many positional arguments after an embstab.Pair (it holds both members)")
            rest = (new, *rest[:k], *rest[k + 1:])
        old, new = old.old, old.new
    elif new is MISSING:
        raise TypeError("a pair needs its old and its new member, in that order (or one embstab.Pair)")
    filled = tuple(d if v is MISSING else v for v, d in zip(rest, defaults)) + tuple(rest[len(defaults):])
    if any(v is MISSING for v in filled):
        raise TypeError("a required argument after the pair is missing")
    return old, new, filled


class _Missing:
    def __repr__(self) -> str:
        return "<required>"


#: The default of a pair API's positional slots after ``old``, so that ``f(pair, ...)`` and
#: ``f(old, new, ...)`` both parse (:func:`unpack_pair` shifts them).
MISSING: Any = _Missing()
