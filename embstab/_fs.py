"""File-system helpers shared by the writers (embedding files, reports)."""

from __future__ import annotations

import os

__all__ = ["publish"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def publish(tmp: str | os.PathLike, target: str | os.PathLike) -> None:
    """Atomically move a finished temporary file into place, with normal permissions.

    ``tempfile.mkstemp`` creates files readable by the owner only (0600); a saved embedding or
    report should get the permissions of any file the user creates (0666 minus the umask).
    """
    os.chmod(tmp, 0o666 & ~_umask())
    os.replace(tmp, target)
