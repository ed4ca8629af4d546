"""The bit widths embstab stores, and the one check every entry point uses.

Uniform quantization rounds onto ``2**bits`` levels for 1 to 16 bits (the widest code the
compressed file format packs) and 32 means the float32 value itself, only clipped. The command line, the library, the study files and the knowledge-graph quantizer all
accept exactly this set and say so in the same words. No heavy imports: the command line's option
parsing uses it.
"""

from __future__ import annotations


from embstab._numbers import is_integer
from embstab.errors import ConfigError

__all__ = ["BIT_WIDTHS", "BIT_WIDTHS_TEXT", "check_bits"]

#: Every bit width a uniform quantizer accepts.
BIT_WIDTHS: tuple[int, ...] = (*range(1, 17), 32)
#: How messages and help texts name that set.
BIT_WIDTHS_TEXT = "1-16 (2**bits levels) or 32 (float32, clipped only)"


def check_bits(bits: object, what: str = "bits") -> int:
    """Return ``bits`` as an int if it is one of :data:`BIT_WIDTHS`.

    Parameters
    ----------
    bits : object
        The value to check (bool is refused; numpy integers are accepted).
    what : str, default "bits"
        How the message names the value (``"--bits"``, ``"compression.bit_widths[2]"``).

    Returns
    -------
    int

    Raises
    ------
    ValueError
        ``"{what} must be 1-16 (2**bits levels) or 32 (float32, clipped only), got {bits!r}"``.
    """
    if not is_integer(bits) or int(bits) not in BIT_WIDTHS:
        raise ConfigError(f"{what} must be {BIT_WIDTHS_TEXT}, got {bits!r}")
    return int(bits)
