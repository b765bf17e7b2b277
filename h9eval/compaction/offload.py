"""Two-stage offloading of large tool results to files (spec §7).

* :class:`OffloadHook` runs at tool time: outputs above 10,000 bytes are written to
  ``<root>/.harness9/tool_results/<session>/<tool_call_id>.txt`` and replaced by a preview.
* :class:`CompactionOffloader` runs inside the Warn/Soft/Full tiers on head tool results above
  4,000 bytes, with an in-memory cache by tool call id.

Both fail open: any error leaves the output unchanged.

**Safe file names (h9eval's deliberate difference from harness9).** harness9 joins the raw ids
into the path, so ``../x`` climbs out of the session folder. By default h9eval maps every id
through :func:`h9eval.core.paths.safe_name`, so ordinary ids give harness9's exact paths. With
``harness9_paths=True`` (the conformance runner's compatibility mode) paths are built as Go's
``filepath.Join`` builds them (lexically cleaned), but a path that would leave the root is still
refused. In both modes a symlink inside the offload tree is never followed, directories are
created 0700 and files 0600.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import stat
import weakref
from dataclasses import dataclass
from pathlib import Path

from h9eval.compaction.records import OffloadEntry
from h9eval.core.errors import ConfigError
from h9eval.core.messages import Message, ToolCall
from h9eval.core.paths import safe_name

__all__ = [
    "ToolOutput",
    "OffloadHook",
    "CompactionOffloader",
    "OffloadError",
    "OffloadOutcome",
    "HOOK_PREFIX",
    "HOOK_EXEMPT_TOOLS",
    "OFFLOAD_HOOK_THRESHOLD_BYTES",
    "OFFLOAD_COMPACTION_THRESHOLD_BYTES",
    "write_failures",
    "write_failure_count",
    "reset_write_failures",
]

# Offloads fail open (harness9 goes on with the output in place), but a write the file system
# refused (a full disk) changes the run, so it is counted per offload root for the caller.
_WRITE_FAILURES: dict[str, list[str]] = {}


def write_failures(root: str | os.PathLike[str]) -> list[str]:
    """The OS errors of offload writes under ``root`` since :func:`reset_write_failures`."""
    return list(_WRITE_FAILURES.get(os.fspath(root), ()))


def write_failure_count(root: str | os.PathLike[str]) -> int:
    """How many offload writes under ``root`` failed since :func:`reset_write_failures`."""
    return len(_WRITE_FAILURES.get(os.fspath(root), ()))


def reset_write_failures(root: str | os.PathLike[str]) -> None:
    _WRITE_FAILURES.pop(os.fspath(root), None)


HOOK_PREFIX = "[输出已保存至"
HOOK_EXEMPT_TOOLS = ("read_file", "write_file", "edit_file")
"""Tools whose output the offload hook never touches (reference §7.1)."""
OFFLOAD_HOOK_THRESHOLD_BYTES = 10_000
"""harness9's ``OffloadHook`` default: outputs of more bytes are offloaded at tool time."""
OFFLOAD_COMPACTION_THRESHOLD_BYTES = 4_000
"""harness9's fixed ``CompactionOffloader`` threshold: larger tool results are offloaded in compaction."""


def _go_join(*parts: str) -> str:
    """Go ``filepath.Join`` on relative parts: drop empty parts, then clean lexically."""
    kept = [p for p in parts if p]
    if not kept:
        return ""
    return posixpath.normpath("/".join(kept))


class OffloadError(Exception):
    """An offload guard refused a message or a write failed (callers skip the message)."""


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """A tool's result as the engine sees it before it becomes a message."""

    tool_call_id: str
    output: str
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class OffloadOutcome:
    entry: OffloadEntry
    placeholder: str


class _Writer:
    """Writes files below ``root`` without following symlinks or leaving the root."""

    def __init__(self, root: str | os.PathLike[str], session_id: str, harness9_paths: bool) -> None:
        self.root = Path(root)
        self.session_id = session_id
        self.harness9_paths = harness9_paths
        self._first: dict[str, str] = {}  # tool call id -> digest of the first output written for it
        # The session folder once a write has verified it: an open descriptor (reached without
        # following a symlink) and its device and inode. Later writes into it open the file
        # relative to the descriptor after one lstat shows the path still names that folder,
        # instead of checking every component again (a dozen system calls per file).
        self._session_dir: tuple[int, int, int] | None = None
        self._close_session_dir: weakref.finalize | None = None

    def rel_dir(self) -> str:
        if self.harness9_paths:
            return _go_join(".harness9", "tool_results", self.session_id)
        return _go_join(".harness9", "tool_results", safe_name(self.session_id))

    def rel_file(self, tool_call_id: str, content: str | None = None) -> str:
        """The file of ``tool_call_id``'s output ``content``. Tool call ids repeat in some
        transcripts: the first output of an id gets harness9's name, a different output of the
        same id gets ``<id>~c<first 12 hex of its SHA-256>.txt``, so it never overwrites the
        first and each placeholder names its own output. (``~c`` is never in a :func:`safe_name`
        result; compatibility mode keeps harness9's one name per id.)"""
        if self.harness9_paths:
            return _go_join(".harness9", "tool_results", self.session_id, tool_call_id + ".txt")
        name = safe_name(tool_call_id)
        if content is not None:
            digest = hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()
            if self._first.setdefault(tool_call_id, digest) != digest:
                name += f"~c{digest[:12]}"
        return _go_join(".harness9", "tool_results", safe_name(self.session_id), name + ".txt")

    def write(self, rel_file: str, content: str) -> None:
        """mkdir -p the session folder (0700), then write ``rel_file`` (0600, truncating).

        Like harness9, only the session folder is created: a file whose parent is another
        folder (an id containing ``/`` in compatibility mode) fails, and the caller fails open.
        """
        rel_dir = self.rel_dir()
        parent, name = posixpath.split(rel_file)
        if parent == rel_dir and self._session_dir is not None and "\x00" not in rel_file:
            dir_fd = self._verified_session_dir(rel_dir)
            if dir_fd is not None:
                self._write_file(name, content, self.root / rel_file, dir_fd)
                return
        self._write_checked(rel_dir, rel_file, content)
        if parent == rel_dir and self._session_dir is None:
            self._open_session_dir(rel_dir)

    def _verified_session_dir(self, rel_dir: str) -> int | None:
        """The remembered session folder's descriptor if the path still names that folder."""
        assert self._session_dir is not None
        fd, dev, ino = self._session_dir
        try:
            st = os.lstat(os.path.join(self.root, rel_dir))
        except OSError:
            st = None
        if st is not None and st.st_dev == dev and st.st_ino == ino and stat.S_ISDIR(st.st_mode):
            return fd
        self._forget_session_dir()  # moved, removed or replaced: check every component again
        return None

    def _open_session_dir(self, rel_dir: str) -> None:
        flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
        if not (getattr(os, "O_DIRECTORY", 0) and getattr(os, "O_NOFOLLOW", 0)) or os.open not in os.supports_dir_fd:
            return  # no safe descriptor walk here: every write checks every component
        fd = -1
        try:
            fd = os.open(self.root, flags)
            for part in rel_dir.split("/"):
                nxt = os.open(part, flags, dir_fd=fd)
                os.close(fd)
                fd = nxt
            st = os.fstat(fd)
        except OSError:
            if fd >= 0:
                os.close(fd)
            return
        self._session_dir = (fd, st.st_dev, st.st_ino)
        self._close_session_dir = weakref.finalize(self, os.close, fd)

    def _forget_session_dir(self) -> None:
        if self._close_session_dir is not None:
            self._close_session_dir()
        self._session_dir = self._close_session_dir = None

    def _write_checked(self, rel_dir: str, rel_file: str, content: str) -> None:
        """The write with every check: the paths stay under the root, no component is a symlink."""
        for rel in (rel_dir, rel_file):
            if rel.startswith("../") or rel == ".." or posixpath.isabs(rel):
                raise OffloadError(f"offload path {rel!r} would leave the offload root")
            if "\x00" in rel:  # compatibility mode keeps raw ids; the OS would raise ValueError
                raise OffloadError(f"offload path {rel!r} contains a NUL character")
        if os.path.islink(self.root):
            raise OffloadError(f"offload root {self.root} is a symbolic link")
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        cur = self.root
        for part in rel_dir.split("/"):
            cur = cur / part
            if not os.path.lexists(cur):
                os.mkdir(cur, 0o700)
            elif os.path.islink(cur) or not os.path.isdir(cur):
                raise OffloadError(f"{cur} is not a real directory")
        target = self.root / rel_file
        # After lexical cleaning the parent may differ from rel_dir (an id such as ``../q``);
        # it must already exist as a real directory inside the root, reached without symlinks.
        cur = self.root
        for part in Path(rel_file).parent.parts:
            cur = cur / part
            if os.path.islink(cur) or not os.path.isdir(cur):
                raise OffloadError(f"{cur} is not a real directory")
        self._write_file(target, content, target, None)

    def _write_file(self, path: str | Path, content: str, target: Path, dir_fd: int | None) -> None:
        """Create ``path`` afresh (relative to ``dir_fd`` when given; never following a symlink
        at it) and write ``content``; ``target`` is its full path, for messages. A file already
        there is unlinked first, never truncated: a name planted as a hard link to a file
        elsewhere is replaced, not written through (O_EXCL: nothing slips in between)."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        try:
            try:
                if stat.S_ISREG(
                    os.stat(path, dir_fd=dir_fd, follow_symlinks=False).st_mode
                ):  # a symlink stays refused (ELOOP)
                    os.unlink(path, dir_fd=dir_fd)
            except FileNotFoundError:
                pass
            fd = os.open(path, flags, 0o600, dir_fd=dir_fd)
        except OSError as e:
            _WRITE_FAILURES.setdefault(os.fspath(self.root), []).append(str(e.strerror or e))
            raise OffloadError(f"cannot write {target}: {e.strerror}") from None
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
                f.write(content)
        except OSError as e:  # ENOSPC mid-write: no half file for a placeholder to point at
            _WRITE_FAILURES.setdefault(os.fspath(self.root), []).append(str(e.strerror or e))
            try:
                os.unlink(path, dir_fd=dir_fd)
            except OSError:
                pass
            raise OffloadError(f"cannot write {target}: {e.strerror}") from None


class OffloadHook:
    """harness9's tool-time ``OffloadHook`` (spec §7.1).

    Parameters: ``root`` (the work directory), ``session_id``, ``threshold_bytes`` (default
    10,000; outputs of *more* bytes are offloaded), ``preview_lines`` (default 20),
    ``exempt_tools`` (never offloaded), ``harness9_paths`` (compatibility path building).
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        session_id: str,
        *,
        threshold_bytes: int = OFFLOAD_HOOK_THRESHOLD_BYTES,
        preview_lines: int = 20,
        exempt_tools: tuple[str, ...] = HOOK_EXEMPT_TOOLS,
        harness9_paths: bool = False,
    ) -> None:
        if preview_lines < 0:
            raise ConfigError(f"preview_lines must be >= 0, got {preview_lines}")
        self.threshold_bytes = threshold_bytes
        self.preview_lines = preview_lines
        self.exempt_tools = tuple(exempt_tools)
        self._w = _Writer(root, session_id, harness9_paths)
        self.offloaded: list[OffloadEntry] = []

    def after_execute(self, tool_call: ToolCall, result: ToolOutput) -> ToolOutput:
        """Return ``result`` unchanged, or with its output replaced by the file preview."""
        if tool_call.name in self.exempt_tools or tool_call.id == "":
            return result
        nbytes = len(result.output.encode("utf-8", "surrogatepass"))
        if nbytes <= self.threshold_bytes:
            return result
        rel = self._w.rel_file(tool_call.id, result.output)
        try:
            self._w.write(rel, result.output)
        except (OSError, OffloadError):
            return result
        lines = result.output.split("\n")
        n = min(self.preview_lines, len(lines))
        out = (
            f"{HOOK_PREFIX} {rel}，共 {len(lines)} 行 / {nbytes} 字节。\n"
            "可通过 read_file 工具配合 offset/limit 参数分页读取。\n\n"
            f"预览（前 {n} 行）：\n" + "\n".join(lines[:n]) + "\n...（已截断）]"
        )
        self.offloaded.append(OffloadEntry(tool_call.id, tool_call.name, rel, nbytes, len(lines)))
        return ToolOutput(result.tool_call_id, out, result.is_error)


class CompactionOffloader:
    """harness9's ``CompactionOffloader`` (spec §7.2).

    ``threshold_bytes`` defaults to harness9's fixed 4,000 (content of *more* bytes is
    offloaded); ``preview_lines`` to 10. The cache remembers tool call ids already written so a
    file is never rewritten (an externally edited file is preserved, as in harness9).
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        session_id: str,
        *,
        threshold_bytes: int = OFFLOAD_COMPACTION_THRESHOLD_BYTES,
        preview_lines: int = 10,
        harness9_paths: bool = False,
    ) -> None:
        if preview_lines < 0:
            raise ConfigError(f"preview_lines must be >= 0, got {preview_lines}")
        self.threshold_bytes = threshold_bytes
        self.preview_lines = preview_lines
        self._w = _Writer(root, session_id, harness9_paths)
        self._cache: set[str] = set()
        self._outcomes: dict[tuple[str, str], OffloadOutcome] = {}

    @property
    def root(self) -> Path:
        return self._w.root

    def offload_tool_result(self, msg: Message) -> OffloadOutcome:
        """Write ``msg``'s content to its file (once) and return the entry and placeholder.

        Raises :class:`OffloadError` for the guards of spec §7.2 and for write failures.
        """
        if msg.tool_call_id == "":
            raise OffloadError("message is not a tool result")
        content = msg.content
        # Keyed by id AND content: two results sharing an id but not their text never share an
        # outcome (a compaction sees the same head result again and again; build it once).
        key = (msg.tool_call_id, content)
        done = self._outcomes.get(key)
        if done is not None:
            return done
        nbytes = msg.content_nbytes
        if nbytes <= self.threshold_bytes:
            raise OffloadError(f"content too small to offload ({nbytes} bytes)")
        if content.startswith(HOOK_PREFIX):
            raise OffloadError("content was already offloaded at tool time")
        rel = self._w.rel_file(msg.tool_call_id, content)
        if rel not in self._cache:  # by file, not id: a repeated id with new content has its own file
            try:
                self._w.write(rel, content)
            except OSError as e:
                raise OffloadError(str(e)) from None
            self._cache.add(rel)
        n_lines = content.count("\n") + 1
        n = min(self.preview_lines, n_lines)
        placeholder = (
            f"[offloaded: {rel} | {n_lines} 行 / {nbytes} bytes]\n"
            f"预览（前 {n} 行）：\n" + _first_lines(content, n) + "\n...（完整结果已保存至文件，可通过 read_file 检索）"
        )
        done = OffloadOutcome(OffloadEntry(msg.tool_call_id, "", rel, nbytes, n_lines), placeholder)
        self._outcomes[key] = done
        return done


def _first_lines(text: str, n: int) -> str:
    """``"\n".join(text.split("\n")[:n])`` without splitting the whole text."""
    if n <= 0:
        return ""
    end = -1
    for _ in range(n):
        end = text.find("\n", end + 1)
        if end < 0:
            return text
    return text[:end]
