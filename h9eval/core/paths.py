"""Paths: where h9eval finds the shared reference data (``shared/`` beside the project), the
output-folder check, the one id -> file-name mapping and the one atomic file writer."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO
from h9eval.core.errors import ConfigError, FormatError

__all__ = [
    "shared_dir",
    "conformance_dir",
    "recorded_dir",
    "repo_root",
    "prepare_out_dir",
    "safe_name",
    "atomic_write",
    "write_text_atomic",
    "write_json_atomic",
    "refuse_symlink",
    "EXPORT_MARKER",
    "check_export_target",
    "new_export_tmp",
    "replace_export_dir",
    "refuse_hard_link",
    "check_db_file",
    "cell_work_dir",
    "check_input_path",
    "max_input_bytes",
]

DEFAULT_MAX_INPUT_BYTES = 2 * 1024**3
"""The largest input file h9eval reads unless ``$H9EVAL_MAX_INPUT_BYTES`` says otherwise."""


def max_input_bytes() -> int:
    """``$H9EVAL_MAX_INPUT_BYTES`` (a positive integer), else :data:`DEFAULT_MAX_INPUT_BYTES`."""
    raw = os.environ.get("H9EVAL_MAX_INPUT_BYTES", "")
    if not raw:
        return DEFAULT_MAX_INPUT_BYTES
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n <= 0:
        raise FormatError(f"H9EVAL_MAX_INPUT_BYTES must be a positive integer, got {raw!r}")
    return n


def check_input_path(path: str | os.PathLike[str], *, what: str = "input") -> None:
    """Refuse (one :class:`FormatError` naming it) an input that is neither a folder nor a
    regular file (``/dev/zero`` would be read until memory runs out, a FIFO blocks forever),
    or a file larger than :func:`max_input_bytes`."""
    p = Path(path)
    if p.is_dir():
        return
    if not p.exists():
        raise FormatError("no such file or folder", path=str(p))
    if not p.is_file():
        raise FormatError(f"{what} is not a regular file or a folder (a device, FIFO or socket)", path=str(p))
    size, limit = p.stat().st_size, max_input_bytes()
    if size > limit:
        raise FormatError(
            f"{what} is {size:,} bytes, above the limit of {limit:,} (set H9EVAL_MAX_INPUT_BYTES to raise it)",
            path=str(p),
        )


_SAFE = re.compile(r"[A-Za-z0-9._-]+")
# Longer plain ids are mapped too: a file name must stay under NAME_MAX (255 bytes) with its
# ".txt"/".jsonl" suffix, else the write fails (ENAMETOOLONG) and the offload silently does not happen.
_MAX_PLAIN = 128


def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


#: where the project's shared folder lives on its own machines, for a checkout elsewhere
_WORKPLACE_SHARED = Path("/work/shared")


def shared_dir() -> Path:
    """``$H9EVAL_SHARED``, else ``<repo>/../shared`` (how CI lays it out), else the
    workplace's ``/work/shared`` (a scratch clone in a temporary folder)."""
    env = os.environ.get("H9EVAL_SHARED")
    if env:
        return Path(env)
    beside = repo_root().parent / "shared"
    if not beside.exists() and _WORKPLACE_SHARED.exists():
        return _WORKPLACE_SHARED
    return beside


def conformance_dir() -> Path:
    return shared_dir() / "reference" / "conformance"


def recorded_dir() -> Path:
    return shared_dir() / "data" / "recorded"


def prepare_out_dir(path: str | os.PathLike[str], *, what: str = "output folder") -> Path:
    """Create ``path`` as a folder (parents too) or raise :class:`FormatError` naming it when a
    file is in the way (at ``path`` or above it) or it cannot be created; an existing folder is
    kept as it is. ``what`` names the folder in the messages."""
    p = Path(path)
    # A linked output folder would put every file h9eval writes wherever the link points.
    refuse_symlink(p, what=what)
    if p.exists() and not p.is_dir():
        raise FormatError(f"{what} path exists and is not a folder", path=str(p))
    blocker = next((a for a in p.parents if a.exists() and not a.is_dir()), None)
    if blocker is not None:
        raise FormatError(f"{blocker} is not a folder; cannot create the {what} under it", path=str(p))
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise FormatError(f"cannot create the {what} ({e.strerror or e})", path=str(p)) from None
    return p


def refuse_symlink(path: str | os.PathLike[str], *, what: str = "path") -> None:
    """Raise :class:`FormatError` naming ``path`` when it is a symbolic link (dangling or not):
    h9eval never writes through a link, so a link planted in an output folder cannot send a
    write outside it."""
    if os.path.islink(path):
        raise FormatError(f"{what} is a symbolic link; refusing to write through it", path=str(path))


EXPORT_MARKER = ".h9eval-export"
"""The file every export folder holds: its one line names the export's kind (``dataset``,
``inspect``). ``--overwrite`` replaces only a folder holding this marker of the same kind."""


def _inside(a: Path, b: Path) -> bool:
    """``a`` is ``b`` or inside it (both resolved)."""
    return a == b or b in a.parents


def check_export_target(
    out: str | os.PathLike[str], *, kind: str, sources: tuple[str | os.PathLike[str], ...], overwrite: bool
) -> Path:
    """Refuse an export folder that would write over something the export did not write.

    ``out`` must not be a symbolic link, nor one of ``sources`` (the folders the export reads), nor
    inside one, nor an ancestor of one. An existing ``out`` is refused without ``overwrite``; with it,
    only when it holds :data:`EXPORT_MARKER` naming ``kind``, i.e. an earlier export of the same kind
    wrote it. So ``--overwrite`` never removes a results folder, the source, or a folder with other
    files in it (a parent holding sibling results).

    Args:
        out: the export folder.
        kind: the export's kind, written into its marker.
        sources: the folders the export reads from.
        overwrite: the user asked to replace an earlier export.

    Returns:
        ``out`` as a :class:`Path`.

    Raises:
        ConfigError: ``out`` exists and may not be replaced, or overlaps a source.
        FormatError: ``out`` is a symbolic link.
    """
    o = Path(out)
    refuse_symlink(o, what="export folder")
    ro = o.resolve()
    for src in sources:
        rs = Path(src).resolve()
        if _inside(ro, rs) or _inside(rs, ro):
            where = "is" if ro == rs else ("is inside" if _inside(ro, rs) else "holds")
            raise ConfigError(
                f"export folder {str(o)!r} {where} the results folder it exports ({str(src)!r}); "
                "pick a folder outside it"
            )
    if not o.exists():
        return o
    if not overwrite:
        raise ConfigError(f"export folder {str(o)!r} already exists (pass --overwrite to replace it)")
    marker = o / EXPORT_MARKER
    try:
        found = marker.read_text(encoding="utf-8").strip() if o.is_dir() and marker.is_file() else None
    except (OSError, UnicodeDecodeError):
        found = None
    if found != kind:
        what = "an export of another kind" if found else "not an export h9eval wrote"
        raise ConfigError(
            f"export folder {str(o)!r} exists and is {what} (no {EXPORT_MARKER} file naming {kind!r}); "
            "--overwrite replaces only an earlier export of the same kind: pick a new folder"
        )
    return o


def new_export_tmp(out: Path) -> Path:
    """A fresh temporary folder beside ``out`` for an export to fill (``mkdtemp``: a new name, so
    nothing an earlier, killed export left is ever removed by this one)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name[:100]}.tmp-"))


def replace_export_dir(tmp: Path, out: Path, *, kind: str) -> None:
    """Mark the finished export ``tmp`` as ``kind`` and put it at ``out``, replacing an earlier
    export there (:func:`check_export_target` has allowed that: it holds the same marker)."""
    (tmp / EXPORT_MARKER).write_text(kind + "\n", encoding="utf-8")
    if out.exists():
        shutil.rmtree(out)
    os.replace(tmp, out)


def refuse_hard_link(path: str | os.PathLike[str], *, what: str = "file", fd: int | None = None) -> None:
    """Raise :class:`FormatError` naming ``path`` when the file (the open ``fd`` when given, else
    the file at ``path`` if any) has more than one hard link: writing to it would change the file
    the other name belongs to as well, wherever that is (a link planted in an output folder).
    ``fd`` is closed before the error is raised."""
    try:
        n = os.fstat(fd).st_nlink if fd is not None else os.lstat(path).st_nlink
    except FileNotFoundError:
        return
    if n > 1:
        if fd is not None:
            os.close(fd)
        raise FormatError(f"{what} has {n} hard links; refusing to write through it", path=str(path))


def check_db_file(path: str | os.PathLike[str], *, what: str = "database") -> None:
    """Before SQLite opens ``path``: refuse it (:class:`FormatError` naming it) when it, or
    its ``-wal`` / ``-shm`` / ``-journal`` companion, is a symbolic link or has a second hard
    link, or when it exists
    and is not a regular file (a folder, a FIFO, a device). SQLite follows links and would
    modify the database they point at."""
    p = str(path)
    for q in (p, p + "-wal", p + "-shm", p + "-journal"):
        refuse_symlink(q, what=what)
        refuse_hard_link(q, what=what)  # SQLite would write into the file the other name belongs to
    if os.path.exists(p) and not os.path.isfile(p):
        raise FormatError(f"{what} is not a regular file", path=p)


def cell_work_dir(out: str | os.PathLike[str], run_id: str) -> Path:
    """A fresh, empty offload folder for one run inside results folder ``out``
    (``<out>/work/<safe run id>``; whatever a killed earlier attempt left there is removed)."""
    work = prepare_out_dir(Path(out) / "work", what="sweep work folder")
    d = work / safe_name(run_id, allow_empty=False)
    refuse_symlink(d, what="cell work folder")
    shutil.rmtree(d, ignore_errors=True)
    return d


def safe_name(raw: str, *, allow_empty: bool = True) -> str:
    """Map an id to one safe path component.

    An id of at most 128 characters made only of ASCII letters, digits, ``.``, ``_`` and ``-``
    (other than ``.`` and ``..``) is used as is, so ordinary ids give harness9's exact paths;
    any other id becomes its characters with each disallowed one replaced by ``_`` (at most 64,
    dots trimmed at the ends) followed by ``~`` and the first 12 hex digits of the id's
    SHA-256. ``~`` is never in an unmapped name, so mapped and unmapped names cannot collide.
    """
    if raw == "" and allow_empty:
        return ""
    if len(raw) <= _MAX_PLAIN and _SAFE.fullmatch(raw) and raw not in (".", ".."):
        return raw
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "_", raw)[:64].strip(".") or "_"
    return f"{cleaned}~{hashlib.sha256(raw.encode('utf-8', 'surrogatepass')).hexdigest()[:12]}"


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """Write ``path`` whole or not at all: yields a binary file opened on a new temporary file
    beside it, renamed over ``path`` when the block ends without an exception (removed
    otherwise). The temporary file is created with ``O_EXCL`` under a random name, so a symlink
    planted at a predictable ``<name>.tmp`` can never redirect the write; ``path`` itself being
    a symlink is refused (:class:`FormatError`), since the rename would leave a regular file
    where the link was and hide what the link pointed at."""
    p = Path(path)
    if p.is_symlink():
        raise FormatError("is a symbolic link; refusing to write through it", path=str(p))
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name[:100]}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "wb") as f:
            yield f
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """:func:`atomic_write` of a UTF-8 text."""
    with atomic_write(path) as f:
        f.write(text.encode("utf-8"))


def write_json_atomic(path: str | os.PathLike[str], data: Any) -> None:
    """:func:`atomic_write` of ``data`` as indented, key-sorted JSON with a final newline (so
    equal data give equal bytes)."""
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
