"""Memory accounting for compressed embeddings."""

from __future__ import annotations

from embstab.lowprec import Format, get_format, handler_for

__all__ = ["memory_bits", "bits_per_entry", "memory_table"]


def memory_bits(dim: int, bitrate: int | float) -> float:
    """Bits per word under the paper's accounting: ``dim * bitrate``.

    The per-matrix clip and the vocabulary are ignored.

    Parameters
    ----------
    dim : int
        Embedding dimension, ≥ 0.
    bitrate : int or float
        Bits per entry, > 0.

    Returns
    -------
    int or float
        Memory in bits per word (an int when the product is integral).

    Raises
    ------
    ValueError
        If ``dim`` < 0 or ``bitrate`` ≤ 0.
    """
    if dim < 0 or bitrate <= 0:
        raise ValueError(f"dim must be >= 0 and bitrate > 0, got dim={dim}, bitrate={bitrate}")
    out = dim * bitrate
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
