"""Every exception class of docquery and ingest is a DocQueryError, drawn where it sits in core/errors.py's tree."""

from __future__ import annotations

import importlib
import pkgutil
import re

import docquery
import ingest
from docquery.core import errors
from docquery.core.errors import DocQueryError

_NODE = re.compile(r"^(?P<indent>[ │]*)[├└]── (?P<name>\w+)")


def _import_everything() -> None:
    for package in (docquery, ingest):
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{package.__name__}."):
            importlib.import_module(info.name)


def _subclasses(cls: type[BaseException]) -> set[type[BaseException]]:
    found: set[type[BaseException]] = set()
    for sub in cls.__subclasses__():
        found |= {sub} | _subclasses(sub)
    return found


def _ours(cls: type) -> bool:
    return cls.__module__.split(".")[0] in {"docquery", "ingest"}


def _drawn() -> dict[str, str]:
    """Each class named in the docstring's tree, with the class drawn as its parent."""
    parents: dict[str, str] = {}
    stack: list[tuple[int, str]] = [(-1, "DocQueryError")]
    for line in (errors.__doc__ or "").splitlines():
        match = _NODE.match(line[4:])  # the tree is indented by 4 in the docstring
        if not match:
            continue
        depth = len(match["indent"])
        while stack[-1][0] >= depth:
            stack.pop()
        parents[match["name"]] = stack[-1][1]
        stack.append((depth, match["name"]))
    return parents


def test_every_exception_class_is_a_docquery_error() -> None:
    _import_everything()
    strays = sorted(
        f"{cls.__module__}.{cls.__qualname__}"
        for cls in _subclasses(BaseException)
        if _ours(cls) and not issubclass(cls, DocQueryError)
    )
    assert strays == []


def test_the_documented_tree_lists_every_subclass_under_its_parent() -> None:
    _import_everything()
    actual = {
        cls.__name__: next(base.__name__ for base in cls.__bases__ if issubclass(base, DocQueryError))
        for cls in _subclasses(DocQueryError)
        if _ours(cls)
    }
    assert _drawn() == actual
