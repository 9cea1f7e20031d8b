"""Reading a file the user named, safely: regular files only, never more than a limit.

One rule for every place that reads a path from a policy or the command line (policy
files, ``template_file``, ``ctxpolicy set``): a FIFO would block forever and a device
such as ``/dev/zero`` never ends, so anything but a regular file is refused, and the read
stops one byte past the limit. The check is made on the opened descriptor too
(``O_NONBLOCK`` open, then ``fstat``), so a file swapped for a FIFO after the first check
cannot hang the reader. (`ctxpolicy.blocks` has a stricter opener that also walks the
path from its root without following symlinks.)
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


class NotRegularFileError(OSError):
    """The path is a folder, FIFO, socket or device."""


class FileTooLargeError(OSError):
    """The file is larger than the allowed size (``size`` is what was seen)."""

    def __init__(self, path: Path, size: int, limit: int, *, grew: bool = False) -> None:
        self.size = size
        self.limit = limit
        self.grew = grew
        super().__init__(errno.EFBIG, f"larger than {limit} bytes", str(path))


def read_regular_file(path: Path, *, max_bytes: int, follow_symlinks: bool = True) -> bytes:
    """The bytes of ``path``, refusing anything but a regular file of at most ``max_bytes``.

    Raises:
        NotRegularFileError: ``path`` is not a regular file.
        FileTooLargeError: ``path`` holds more than ``max_bytes`` bytes (``grew`` is True
            when it grew between the size check and the read).
        OSError: ``path`` cannot be opened or read.
    """
    info = path.stat()
    if not stat.S_ISREG(info.st_mode):
        raise NotRegularFileError(errno.EINVAL, "not a regular file", str(path))
    if info.st_size > max_bytes:
        raise FileTooLargeError(path, info.st_size, max_bytes)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    with os.fdopen(os.open(path, flags), "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):  # swapped since the check
            raise NotRegularFileError(errno.EINVAL, "not a regular file", str(path))
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise FileTooLargeError(path, len(data), max_bytes, grew=True)
    return data


__all__ = ["FileTooLargeError", "NotRegularFileError", "read_regular_file"]
