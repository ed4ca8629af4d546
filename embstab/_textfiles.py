"""Reading the text files a user hands embstab: UTF-8, lines, YAML and JSON, with bounded work.

Every reader here turns a hostile or broken file into a :class:`~embstab.errors.DataFormatError`
that names the file and, where one applies, the line, instead of a traceback, a silent
misreading or unbounded work:

* :func:`read_utf8` reports the byte offset (and line) of the first byte that is not UTF-8;
* :func:`split_lines` splits on ``\\n`` only (plus a trailing ``\\r``): :meth:`str.splitlines` also
  splits on U+2028, U+0085 and other separators, so a label holding one became two lines;
* :func:`load_yaml` is PyYAML's safe loader plus three refusals: a document that aliases expand
  beyond :data:`MAX_YAML_SIZE` nodes and characters (a 2 KB "billion laughs" file grows to
  gigabytes when it is serialised), nesting deeper than :data:`MAX_NESTING` levels (which would
  end in a ``RecursionError``), and a key given twice in one mapping (where the last one silently won);
* :func:`loads_json` is :func:`json.loads` with the same nesting bound.
"""

from __future__ import annotations

import json
import os
from typing import Any

from embstab.errors import DataFormatError

__all__ = ["MAX_NESTING", "MAX_YAML_SIZE", "read_utf8", "split_lines", "load_yaml", "loads_json", "json_depth"]

#: Deepest nesting of lists and mappings accepted in a YAML or JSON file (embstab's own files
#: nest 3 to 5 levels; Python's recursion limit ends near 1,000).
MAX_NESTING = 100
#: Largest YAML document, counted after alias expansion as nodes plus characters of scalars (a
#: study file is a few thousand; serialising the document costs about this many bytes).
MAX_YAML_SIZE = 2_000_000

_MERGE_TAG = "tag:yaml.org,2002:merge"


def read_utf8(path: str | os.PathLike) -> str:
    """The text of a UTF-8 file, without a leading byte-order mark.

    Parameters
    ----------
    path : str or os.PathLike
        The file.

    Returns
    -------
    str
        Its text.

    Raises
    ------
    DataFormatError
        If a byte sequence is not UTF-8; the message names the line and the byte offset.
    OSError
        If the file cannot be read.
    """
    with open(path, "rb") as fh:
        raw = fh.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = raw[exc.start:exc.start + 1]
        raise DataFormatError(path, f"not UTF-8 text: {exc.reason} (byte 0x{bad.hex()} at byte offset {exc.start})",
                              raw.count(b"\n", 0, exc.start) + 1) from None
    return text.removeprefix("\ufeff")


def split_lines(text: str) -> list[str]:
    """Split ``text`` into lines at ``\\n`` only, dropping a ``\\r`` before it (Windows line ends).

    Unlike :meth:`str.splitlines`, characters such as U+2028, U+0085, form feed or the ASCII
    separators stay inside their line, so line numbers match what an editor shows.

    Parameters
    ----------
    text : str
        The text of a file.

    Returns
    -------
    list of str
        The lines, without their line ends; a final line end does not start an empty line.
    """
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _yaml_loader():
    """The loader class, built on first use (PyYAML is only needed when a YAML file is read)."""
    import yaml  # noqa: PLC0415

    # the pure-Python loader: its composer is what the bounds hook into
    class BoundedLoader(yaml.SafeLoader):
        """PyYAML's safe loader that tracks nesting while composing, and the first alias."""

        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self.depth = 0
            self.first_alias_line: int | None = None

        def compose_node(self, parent, index):  # noqa: ANN001 - PyYAML's signature
            if self.check_event(yaml.AliasEvent) and self.first_alias_line is None:
                self.first_alias_line = self.peek_event().start_mark.line + 1
            if not self.check_event(yaml.SequenceStartEvent, yaml.MappingStartEvent):
                return super().compose_node(parent, index)
            self.depth += 1
            try:
                if self.depth > MAX_NESTING:
                    line = self.peek_event().start_mark.line + 1
                    raise _Refused(f"lists and mappings nested more than {MAX_NESTING} levels deep", line)
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    return BoundedLoader


class _Refused(Exception):
    """A bound of :func:`load_yaml` was crossed (internal; becomes a DataFormatError)."""

    def __init__(self, problem: str, line: int | None) -> None:
        super().__init__(problem)
        self.problem, self.line = problem, line


def _children(node: Any) -> list[Any]:
    import yaml  # noqa: PLC0415

    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_graph(loader: Any, root: Any) -> None:
    """Size after alias expansion, cycles and duplicate keys of a composed YAML document.

    One pass over the distinct nodes (aliases share nodes, so the graph is small even when its
    expansion is not): each node's expanded size is its own cost plus its children's sizes.
    """
    import yaml  # noqa: PLC0415

    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            on_path.discard(key)
            own = 1 + (len(node.value) if isinstance(node, yaml.ScalarNode) else 0)
            # capped, so that an exponential nest stays a small number
            sizes[key] = min(MAX_YAML_SIZE + 1, own + sum(sizes[id(c)] for c in _children(node)))
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise _Refused("an alias refers to a node that contains it (a recursive structure)",
                           node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            _check_keys(loader, node)
        on_path.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if id(c) not in sizes)
    if sizes[id(root)] > MAX_YAML_SIZE:
        first = loader.first_alias_line
        via = f"aliases (the first at line {first}) expand it" if first else "it holds"
        raise _Refused(f"the document is too large: {via} beyond {MAX_YAML_SIZE:,} nodes and characters "
                       "(every use of an alias counts)", None)


def _check_keys(loader: Any, node: Any) -> None:
    import yaml  # noqa: PLC0415

    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _MERGE_TAG:
            continue  # merged keys may be overridden on purpose; complex keys are left to PyYAML
        key = loader.construct_object(key_node)
        line = key_node.start_mark.line + 1
        try:
            first = seen.get(key)
        except TypeError:  # unhashable: PyYAML reports it
            continue
        if first is not None:
            raise _Refused(f"duplicate key {key!r} (first given at line {first}; the later one would silently win)",
                           line)
        seen[key] = line


def load_yaml(text: str, source: str | os.PathLike) -> Any:
    """Parse one YAML document with PyYAML's safe loader, refusing what would cost unbounded work.

    Parameters
    ----------
    text : str
        The document.
    source : str or os.PathLike
        Where it came from, for error messages.

    Returns
    -------
    object
        The plain data (None for an empty document).

    Raises
    ------
    DataFormatError
        Naming the file and line: invalid YAML, a key given twice in one mapping, nesting deeper
        than :data:`MAX_NESTING`, a recursive alias, or a document that aliases expand beyond
        :data:`MAX_YAML_SIZE` nodes and characters.
    """
    import yaml  # noqa: PLC0415

    loader = _yaml_loader()(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_graph(loader, node)
        return loader.construct_document(node)
    except _Refused as exc:
        raise DataFormatError(source, exc.problem, exc.line) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise DataFormatError(source, f"not valid YAML: {exc}", None if mark is None else mark.line + 1) from None
    except RecursionError:  # a structure the bounds above did not foresee
        raise DataFormatError(source, "the YAML nests too deeply to read") from None
    finally:
        loader.dispose()


def json_depth(value: Any) -> int:
    """Nesting depth of parsed JSON: 0 for a scalar, 1 for a flat list or object.

    Parameters
    ----------
    value : object
        Lists, dicts and scalars.

    Returns
    -------
    int
        The depth (computed without recursion).
    """
    deepest = 0
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (list, dict)):
            depth += 1
            deepest = max(deepest, depth)
            stack.extend((child, depth) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _too_deep_at(text: str) -> int:
    """Character position where ``text`` first nests deeper than :data:`MAX_NESTING` (0 if nowhere)."""
    depth, in_string, escaped = 0, False, False
    for pos, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > MAX_NESTING:
                return pos
        elif ch in "]}":
            depth -= 1
    return 0


def loads_json(text: str | bytes) -> Any:
    """:func:`json.loads`, refusing nesting deeper than :data:`MAX_NESTING`.

    Parameters
    ----------
    text : str or bytes
        The JSON text.

    Returns
    -------
    object
        The parsed value.

    Raises
    ------
    json.JSONDecodeError
        For invalid JSON, and for JSON nested too deeply (which would otherwise end in a
        ``RecursionError`` here or in the code that walks the result); it is a :class:`ValueError`,
        so a caller's existing check for invalid JSON covers it.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    try:
        value = json.loads(text)
    except RecursionError:
        value = None
    else:
        if json_depth(value) <= MAX_NESTING:
            return value
    raise json.JSONDecodeError(f"nested more than {MAX_NESTING} levels deep", text, _too_deep_at(text))
