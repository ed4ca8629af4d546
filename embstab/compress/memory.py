"""Memory accounting for compressed embeddings."""

from __future__ import annotations

import numpy as np

from embstab.errors import ConfigError
from embstab.lowprec import Format, get_format, handler_for

__all__ = ["memory_bits", "table_bits", "bits_per_entry", "memory_table"]


def memory_bits(dim, bitrate, *, overhead_bits=0):
    """Bits one stored row takes: ``dim * bitrate``, plus any per-row overhead.

    The one memory formula of embstab: a word vector, a KG entity row and a contextual feature
    vector are all counted this way, by compression, KG quantization, study rows, results tables
    and selection. The per-matrix clip and the vocabulary are not counted per row (see
    :func:`table_bits`).

    Parameters
    ----------
    dim : int or array-like
        Entries per row (a complex model's real view counts both parts), ≥ 0.
    bitrate : int, float or array-like
        Bits per entry, > 0 (for a block format, :func:`bits_per_entry`, shared scales included).
    overhead_bits : int or float, optional
        Bits stored per row beside its entries (e.g. a per-row scale), ≥ 0.

    Returns
    -------
    int, float or array-like
        Memory in bits per row: an int when a scalar result is integral; arrays and pandas
        columns come back element-wise, of the same type.

    Raises
    ------
    ValueError
        If ``dim`` < 0, ``bitrate`` ≤ 0 or ``overhead_bits`` < 0 (anywhere, for arrays).
    """
    if np.any(np.asarray(dim) < 0) or np.any(np.asarray(bitrate) <= 0) or np.any(np.asarray(overhead_bits) < 0):
        shown = [x if np.ndim(x) == 0 else f"a {type(x).__name__} of {np.size(x)} values" for x in (dim, bitrate)]
        raise ConfigError(f"dim must be >= 0 and bitrate > 0 (overhead_bits >= 0), got dim={shown[0]}, "
                         f"bitrate={shown[1]}, overhead_bits={overhead_bits}")
    out = dim * bitrate + overhead_bits
    if np.ndim(out) == 0:
        return int(out) if float(out).is_integer() else float(out)
    return out


def table_bits(rows: int, dim: int, bitrate: int | float, *, clip_bits: int = 32) -> int | float:
    """Bits a whole quantized table takes: ``rows`` rows of :func:`memory_bits` plus its clip.

    Parameters
    ----------
    rows : int
        Rows of the table, ≥ 0.
    dim : int
        Entries per row, ≥ 0.
    bitrate : int or float
        Bits per entry, > 0.
    clip_bits : int, default 32
        Bits of the table's one clip value (a float32); 0 for a table stored unquantized.

    Returns
    -------
    int or float
        Memory in bits.

    Raises
    ------
    ValueError
        If a count is negative or ``bitrate`` ≤ 0.
    """
    if rows < 0 or clip_bits < 0:
        raise ConfigError(f"rows and clip_bits must be >= 0, got rows={rows}, clip_bits={clip_bits}")
    out = rows * memory_bits(dim, bitrate) + clip_bits
    return int(out) if float(out).is_integer() else float(out)


def bits_per_entry(fmt: Format | str | int, dim: int | None = None) -> float:
    """Storage bits per matrix entry of a format, shared scales included.

    Parameters
    ----------
    fmt : Format, str or int
        A format or preset name; an int is a uniform bit rate.
    dim : int, optional
        Row length. With it, shared scales are counted per block actually stored in a row (a
        row of 48 holds two MX blocks of 32: 8 + 16/48 bits per entry); without it, full blocks.

    Returns
    -------
    float
        For example 8.25 for MXINT8 (8 + 8/32), word bits + 16/dim for per-row block float.
    """
    if isinstance(fmt, int):
        return float(fmt)
    fmt = get_format(fmt)
    return handler_for(fmt).bits_per_entry(fmt, dim)


def memory_table(dims, bitrates):
    """Tidy DataFrame of every (dim, bitrate) pair with its memory in bits per word.

    Parameters
    ----------
    dims : iterable of int
        Dimensions.
    bitrates : iterable of int
        Bit rates.

    Returns
    -------
    pandas.DataFrame
        Columns ``dim``, ``bitrate`` and ``memory``, one row per pair (dims outer).
    """
    import pandas as pd

    rows = [{"dim": int(d), "bitrate": int(b), "memory": memory_bits(int(d), int(b))} for d in dims for b in bitrates]
    return pd.DataFrame(rows, columns=["dim", "bitrate", "memory"])
