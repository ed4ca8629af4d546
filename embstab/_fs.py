"""File-system helpers shared by every writer: one atomic write, one input/output guard, one JSON.

Every file embstab writes (embedding files, compressed files, reports, study artifacts, Parquet
tables) goes through :func:`atomic_write`, so the rules below hold everywhere:

* a regular file (or a new path) is written to a temporary file next to it and renamed into place,
  so a crash never leaves half a file and never clobbers the old one with a partial one;
* a target that exists and is *not* a regular file (``/dev/null``, ``/dev/stdout``, a symlink to
  ``/proc/self/fd/1``, a named pipe, a terminal) is written into directly: renaming over it would
  replace the device node or the pipe, and nothing would reach its reader;
* a symlink to a regular file keeps being a symlink: the file it points to is replaced.

:func:`check_outputs` refuses an output that would land on one of the command's inputs: the same
file or folder (after resolving symlinks, or another hard link of it), a folder that contains an
input, or a path inside an input folder. :func:`check_inputs` refuses inputs that are devices, named
pipes or sockets (a read of ``/dev/zero`` never ends, one of a FIFO without a writer never starts).
Every command runs both before any work. :func:`to_json` is the one JSON encoding (sorted keys,
compact, numpy values as numbers) used for configuration hashes and file metadata.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from typing import IO, Any

from embstab.errors import ConfigError, DataFormatError

__all__ = ["atomic_write", "is_temp_name", "temp_path_for", "TEMP_SUFFIX", "is_special", "check_outputs",
           "check_inputs", "check_writable", "OutputClashError", "to_json", "json_safe", "publish"]


class OutputClashError(ConfigError):
    """An output path would overwrite one of the command's inputs (or another output)."""


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def publish(tmp: str | os.PathLike, target: str | os.PathLike, mode: int | None = None) -> None:
    """Atomically move a finished temporary file into place, with normal permissions.

    ``tempfile.mkstemp`` creates files readable by the owner only (0600); a saved file should get
    the permissions of the file it replaces, or those of any new file (0666 minus the umask).
    """
    os.chmod(tmp, (0o666 & ~_umask()) if mode is None else mode)
    os.replace(tmp, target)


def _is_fd_link(path: str) -> bool:
    return path.startswith(("/proc/", "/dev/fd/")) or path in ("/dev/stdout", "/dev/stderr", "/dev/stdin")


def _through_fd_link(path: str) -> bool:
    """Whether ``path`` or a symlink on its way is a file-descriptor link (``/dev/stdout``, ``/proc/self/fd/1``)."""
    p = os.path.abspath(path)
    for _ in range(40):  # the kernel's own limit on symlink hops
        if _is_fd_link(p):
            return True
        if not os.path.islink(p):
            return False
        p = os.path.normpath(os.path.join(os.path.dirname(p), os.readlink(p)))
    return False


def is_special(path: str | os.PathLike) -> bool:
    """Whether ``path`` exists and is not a regular file (device, FIFO, socket, terminal, fd link).

    Such a target is written into, never replaced (see the module docstring).
    """
    path = os.fspath(path)
    try:
        st = os.stat(path)
    except OSError:
        return False
    if stat.S_ISDIR(st.st_mode):
        return False
    # a regular file reached through a descriptor link (``/dev/stdout`` redirected to a file) is
    # held open by the shell: renaming over it would detach the output from what the shell reads
    return not stat.S_ISREG(st.st_mode) or _through_fd_link(path)


TEMP_SUFFIX = ".tmp"


def temp_path_for(target: str, token: str) -> str:
    """The name a writer gives its temporary file beside ``target`` (hidden, ``.tmp`` suffix)."""
    parent, _, base = target.rpartition("/")
    return f"{parent}/.{base}.{token}{TEMP_SUFFIX}" if parent else f".{base}.{token}{TEMP_SUFFIX}"


def is_temp_name(name: str) -> bool:
    """Whether a file name is a writer's temporary file.

    A writer killed mid-write (SIGKILL, power cut) leaves one behind; readers skip these names and
    a store sweeps them once they are old enough that no live writer can own them.
    """
    return name.startswith(".") and name.endswith(TEMP_SUFFIX)


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "wb", *, encoding: str | None = None,
                 newline: str | None = None, fsync: bool = True) -> Iterator[IO[Any]]:
    """Open ``path`` for writing so that readers see the old file or the whole new one.

    Parameters
    ----------
    path : str or os.PathLike
        The target. Its directory must exist.
    mode : {"wb", "w"}
        Binary or text.
    encoding, newline : str, optional
        For text mode (``encoding`` defaults to UTF-8).
    fsync : bool
        Flush the data to disk before the rename, so that after a power cut the name never points
        at a file whose blocks were not written.

    Yields
    ------
    file object
        Write the content into it; on a clean exit it is renamed over ``path``, on an exception
        it is deleted and ``path`` is untouched.

    Raises
    ------
    IsADirectoryError
        ``path`` is a directory.
    OSError
        The directory is not writable, the disk is full, ...
    """
    if mode not in ("wb", "w"):
        raise ValueError(f"atomic_write mode must be 'wb' or 'w', got {mode!r}")
    path = os.fspath(path)
    text = {"encoding": encoding or "utf-8", "newline": newline} if mode == "w" else {}
    if os.path.isdir(path):
        raise IsADirectoryError(21, "is a directory, not a file", path)
    if is_special(path):
        # stream into the device / pipe / terminal: replacing it would destroy it
        try:
            with open(path, mode, **text) as fh:
                yield fh
        except OSError as exc:
            if exc.filename is None and exc.errno is not None:  # write/close errors do not name the file
                raise OSError(exc.errno, exc.strerror, path) from None
            raise
        return
    target = os.path.realpath(path)  # a symlink stays a symlink; the file behind it is replaced
    directory = os.path.dirname(target) or "."
    try:
        old_mode = stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        old_mode = None
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=TEMP_SUFFIX, dir=directory)
    try:
        with os.fdopen(fd, mode, **text) as fh:
            yield fh
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        publish(tmp, target, old_mode)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


def check_writable(path: str | os.PathLike, label: str, *, create_parents: bool = False,
                   no_clobber: bool = False, folder: bool = False) -> None:
    """Refuse, before any work, an output that is a directory or whose directory does not exist.

    Parameters
    ----------
    path : str or os.PathLike
        The output.
    label : str
        The flag or argument it was given as, for the message.
    create_parents : bool
        The writer creates missing directories itself (then only a file in the way is an error).
    no_clobber : bool
        Also refuse an existing regular file (``--no-clobber``); devices and pipes stay writable.
    folder : bool
        The output is a folder the command fills (a model folder): it must be a directory or not
        exist yet, and missing parents are created by the writer.

    Raises
    ------
    OutputClashError
        Naming the flag and the path.
    """
    path = os.fspath(path)
    if folder:
        if os.path.lexists(path) and not os.path.isdir(path):
            raise OutputClashError(f"{label} {path} exists and is not a folder")
        create_parents = True
    elif os.path.isdir(path):
        raise OutputClashError(f"{label} {path} is a directory; give a file name")
    if no_clobber and os.path.lexists(path) and not is_special(path):
        raise OutputClashError(f"{label} {path} exists and --no-clobber is set; remove it or drop --no-clobber")
    parent = os.path.dirname(os.path.abspath(path))
    if create_parents:
        while not os.path.exists(parent):
            parent = os.path.dirname(parent)
        if not os.path.isdir(parent):
            raise OutputClashError(f"{label} {path}: {parent} is not a directory")
    elif not os.path.isdir(parent):
        raise OutputClashError(f"{label} {path}: the directory {parent} does not exist")


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)  # same inode: symlinks and hard links included
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _under(child: str, parent: str) -> bool:
    """Whether the normalised absolute path ``child`` lies strictly below ``parent``."""
    return child != parent and os.path.commonpath([child, parent]) == parent


def _spellings(path: str) -> set[str]:
    # as typed and with symlinks resolved: a folder reached through a link is still that folder,
    # and a link inside an output folder is written through onto what it points at
    return {os.path.abspath(path), os.path.realpath(path)}


def _clash(out: str, inp: str) -> str | None:
    """How writing ``out`` would land on the existing input ``inp``, in words (None: it would not)."""
    if _same_file(out, inp):
        return f"is the same {'folder' if os.path.isdir(inp) else 'file'} as the input"
    outs, ins = _spellings(out), _spellings(inp)
    if any(_under(i, o) for i in ins for o in outs):
        return "contains the input"
    if os.path.isdir(inp) and any(_under(o, i) for i in ins for o in outs):
        return "is inside the input folder"
    return None


def check_outputs(outputs: Iterable[tuple[str, str | os.PathLike]],
                  inputs: Iterable[tuple[str, str | os.PathLike]] = ()) -> None:
    """Refuse an output that would land on one of the inputs, or that is given twice.

    An output clashes with an input when it is the same file or folder (through symlinks and hard
    links), when it is a folder that contains the input (``--out X`` with ``--base X/a``), or
    when it lies inside an input folder (``--out MODEL/tokenizer.json``).

    Parameters
    ----------
    outputs, inputs : iterable of (label, path)
        ``label`` is what the user typed the path as (``"OUT"``, ``"--like"``); it appears in
        the message. Inputs that do not exist (``builtin:NAME``, dataset and graph names) and
        outputs that are special files (``/dev/null``, ``/dev/stdout``) are ignored.

    Raises
    ------
    OutputClashError
        Naming both arguments.
    """
    outs = [(label, os.fspath(p)) for label, p in outputs if p is not None]
    ins = [(label, os.fspath(p)) for label, p in inputs if p is not None and os.path.exists(os.fspath(p))]
    for i, (olabel, out) in enumerate(outs):
        if is_special(out):
            continue
        for ilabel, inp in ins:
            how = _clash(out, inp)
            if how is not None:
                raise OutputClashError(f"{olabel} {out} {how} {ilabel} {inp}; "
                                       "refusing to overwrite an input, write to another path")
        for olabel2, out2 in outs[:i]:
            if _same_file(out, out2):
                raise OutputClashError(f"{olabel} {out} and {olabel2} {out2} are the same file; give distinct outputs")


_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"))


def _special_kind(path: str) -> str | None:
    """What ``path`` is when it exists and is neither a regular file nor a folder (None otherwise)."""
    try:
        mode = os.stat(path).st_mode  # follows symlinks: a link to /dev/zero reads /dev/zero
    except OSError:
        return None  # missing (or a dangling link): the reader reports it in its own words
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    kind = next((name for test, name in _KINDS if test(mode)), "a special file")
    if os.path.islink(path):
        return f"a symlink to the {kind.partition(' ')[2]} {os.path.realpath(path)}"
    return kind


def check_inputs(inputs: Iterable[tuple[str, str | os.PathLike]]) -> None:
    """Refuse, before any work, inputs that are devices, named pipes or sockets.

    Reading ``/dev/zero`` never ends, opening a FIFO without a writer never returns, and the
    readers open their files more than once; an input must be a regular file (or a folder). A folder
    input is read file by file, so every entry directly inside it must not be one either.

    Parameters
    ----------
    inputs : iterable of (label, path)
        ``label`` is what the user typed the path as (``"--text"``, ``"GRAPH"``). Paths that do not
        exist (``builtin:NAME``, dataset and graph names, a file the reader reports missing) are
        ignored.

    Raises
    ------
    embstab.errors.DataFormatError
        Naming the path, the flag and what the path is.
    """

    for label, p in inputs:
        if p is None:
            continue
        path = os.fspath(p)
        found = [(path, _special_kind(path))]
        if os.path.isdir(path):
            with os.scandir(path) as entries:
                found += [(e.path, _special_kind(e.path)) for e in sorted(entries, key=lambda e: e.name)]
        for where, kind in found:
            if kind is not None:
                inside = "" if where == path else f" inside {path}"
                raise DataFormatError(where, f"not a regular file ({kind}{inside}, given as {label}); give a "
                                             "regular file (copy a stream into one first)")


# ------------------------------------------------------------------------------------------ JSON
def _encode(obj: Any) -> Any:
    import numpy as np  # noqa: PLC0415 (keep this module cheap to import)

    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    raise TypeError(f"value {obj!r} of type {type(obj).__name__} is not JSON-serialisable")


def to_json(value: Any) -> str:
    """The one JSON encoding: sorted keys, no white space, ASCII, numpy values as Python values.

    Deterministic, so it serves as the canonical form that configuration hashes are taken of.

    Raises
    ------
    TypeError
        A value that has no JSON form (an object, a function, ...).
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=_encode)


def json_safe(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of ``mapping`` that :func:`to_json` can encode (nested mappings filtered alike).

    Free-form metadata (training settings, the clip value, ...) goes into files this way: what has
    no JSON form (arrays of objects, live objects) is left out rather than written as text.
    """
    out: dict[str, Any] = {}
    for key, value in mapping.items():
        if isinstance(value, Mapping):
            out[str(key)] = json_safe(value)
            continue
        try:
            out[str(key)] = json.loads(to_json(value))
        except (TypeError, ValueError):
            continue
    return out
