"""Reading and writing hyperbolic and product embeddings: one module for both text formats.

A file starts with a magic line naming its kind, then a JSON header, then one row per node
(label, tab-separated coordinates). Multiprecision coordinates keep all their digits; float64 ones
are written with ``repr`` (exact). Files are written atomically (a crash leaves the old file or
the whole new one) and every malformed file is reported with its name and line.
"""

from __future__ import annotations

import json
import math
import os

import mpmath
import numpy as np

from embstab._fs import atomic_write, json_safe
from embstab.errors import EmbeddingFormatError
from embstab.hyperbolic.embedding import HyperbolicEmbedding
from embstab.hyperbolic.errors import HyperbolicError
from embstab.hyperbolic.product import ProductEmbedding, ambient_width, parse_factors

__all__ = ["HYPERBOLIC_MAGIC", "PRODUCT_MAGIC", "save_embedding", "load_embedding"]

HYPERBOLIC_MAGIC = "# embstab-hyperbolic v1"
PRODUCT_MAGIC = "# embstab-product v1"


def save_embedding(emb: HyperbolicEmbedding | ProductEmbedding, path: str | os.PathLike) -> None:
    """Write a hyperbolic or product embedding to a text file, atomically.

    Parameters
    ----------
    emb : HyperbolicEmbedding or ProductEmbedding
        What to write.
    path : str or os.PathLike
        The target file.

    Raises
    ------
    TypeError
        If ``emb`` is neither kind.
    """
    if isinstance(emb, ProductEmbedding):
        head = {"factors": emb.signature, "combine": emb.combine, "scale": emb.scale, "n": len(emb),
                "metadata": json_safe(emb.metadata)}
        rows = (_row(lab, (repr(float(c)) for c in row)) for lab, row in zip(emb.nodes.tolist(), np.hstack(emb.coords)))
        _write(path, PRODUCT_MAGIC, head, rows)
        return
    if not isinstance(emb, HyperbolicEmbedding):
        raise TypeError(f"save_embedding takes a HyperbolicEmbedding or ProductEmbedding, got {type(emb).__name__}")
    head = {"model": emb.model, "scale": emb.scale, "precision_bits": emb.precision_bits,
            "multiprecision": emb.multiprecision, "n": len(emb), "dim": emb.dim,
            "metadata": json_safe(emb.metadata)}
    digits = math.ceil(emb.precision_bits * math.log10(2)) + 3

    def fmt(row):
        if emb.multiprecision:
            return (mpmath.nstr(c, digits, strip_zeros=False, min_fixed=1, max_fixed=0) for c in row)
        return (repr(float(c)) for c in row)

    _write(path, HYPERBOLIC_MAGIC, head, (_row(lab, fmt(row)) for lab, row in zip(emb.nodes.tolist(), emb.coords)))


def _row(label, values) -> str:
    return str(label) + "\t" + "\t".join(values) + "\n"


def _write(path, magic: str, head: dict, rows) -> None:
    with atomic_write(path, "w") as fh:
        fh.write(magic + "\n# " + json.dumps(head) + "\n")
        fh.writelines(rows)


def load_embedding(path: str | os.PathLike) -> HyperbolicEmbedding | ProductEmbedding:
    """Read a file written by :func:`save_embedding`; the magic line says which kind it is.

    Parameters
    ----------
    path : str or os.PathLike
        The file.

    Returns
    -------
    HyperbolicEmbedding or ProductEmbedding

    Raises
    ------
    embstab.errors.EmbeddingFormatError
        When the file is missing, not such a file, or a header or row is malformed.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise EmbeddingFormatError(path, "no such file")
    with open(path, encoding="utf-8") as fh:
        first = fh.readline().rstrip("\n")
        if first not in (HYPERBOLIC_MAGIC, PRODUCT_MAGIC):
            raise EmbeddingFormatError(path, "not an embstab hyperbolic embedding (first line should be "
                                       f"{HYPERBOLIC_MAGIC!r} or {PRODUCT_MAGIC!r})", line=1)
        try:
            head = json.loads(fh.readline()[2:])
            if first == PRODUCT_MAGIC:
                factors = parse_factors(head["factors"])
                widths = [ambient_width(k, d) for k, d in factors]
            else:
                widths = [head["dim"] + (head["model"] == "hyperboloid")]
                bits, mp_ = head["precision_bits"], head["multiprecision"]
        except (json.JSONDecodeError, KeyError, TypeError, HyperbolicError) as exc:
            raise EmbeddingFormatError(path, f"bad header: {exc}", line=2) from None
        if first == PRODUCT_MAGIC:
            labels, rows = _read_rows(fh, path, sum(widths), float)
        else:
            with mpmath.workprec(bits):
                labels, rows = _read_rows(fh, path, widths[0], mpmath.mpf if mp_ else float)
            labels = [int(lab) if lab.lstrip("-").isdigit() else lab for lab in labels]
    if len(rows) != head.get("n", len(rows)):
        raise EmbeddingFormatError(path, f"header says {head['n']} rows, found {len(rows)} (truncated file?)")
    try:
        if first == PRODUCT_MAGIC:
            flat = np.asarray(rows, dtype=np.float64).reshape(len(rows), sum(widths))
            blocks = np.split(flat, np.cumsum(widths)[:-1], axis=1)
            return ProductEmbedding(blocks, factors, combine=head.get("combine", "l2"), scale=head.get("scale", 1.0),
                                    nodes=labels, metadata=head.get("metadata"))
        coords = np.array(rows, dtype=object) if mp_ else np.array(rows, dtype=np.float64)
        return HyperbolicEmbedding(coords, model=head["model"], scale=head["scale"], nodes=labels,
                                   precision_bits=bits if mp_ else None, metadata=head.get("metadata", {}))
    except HyperbolicError as exc:
        raise EmbeddingFormatError(path, str(exc)) from None


def _is_number(text: str, number) -> bool:
    try:
        number(text)
    except ValueError:
        return False
    return True


def _read_rows(fh, path: str, width: int, number) -> tuple[list[str], list[list]]:
    labels, rows = [], []
    for lineno, line in enumerate(fh, 3):
        parts = line.rstrip("\n").split("\t")
        if len(parts) != width + 1:
            raise EmbeddingFormatError(path, f"expected a label and {width} coordinates, got {len(parts)} fields",
                                       lineno)
        try:
            rows.append([number(s) for s in parts[1:]])
        except ValueError:
            bad = next(s for s in parts[1:] if not _is_number(s, number))
            raise EmbeddingFormatError(path, f"non-numeric coordinate {bad!r}", lineno) from None
        labels.append(parts[0])
    return labels, rows
