"""Files ``docquery ingest --server`` hands over: corpus documents, keeping their corpus ids.

The CLI discovers the files and resolves their ACLs where they are, then sends each with ``corpus``: a JSON
list, one ``{"path", "root"}`` per file in order, the file's resolved path and its ingest root. The service
derives the id from the path as a direct run does (``collection.document_id`` under the collection's key),
so a later direct run finds the document unchanged, and cites it as ``<root's name>/<path under it>``.
The namespace rule still holds: a document the caller did not send is replaced only by a caller who could
delete it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import PurePosixPath

from docquery.api.errors import ApiError

MAX_PATH_CHARS = 4096


@dataclass(frozen=True)
class CorpusFile:
    path: str
    root: str

    @property
    def cited_as(self) -> str:
        """As ``ingest.model.SourceFile.cited_as``: the root folder's name, then the path under it."""
        root = PurePosixPath(self.root)
        rel = PurePosixPath(self.path).relative_to(root).as_posix()
        return f"{root.name}/{rel}" if root.name else rel


def _refused(reason: str) -> ApiError:
    return ApiError(422, f"invalid request: corpus: {reason}")


def _clean(value: object, what: str, n: int) -> PurePosixPath:
    if not isinstance(value, str) or not value or len(value) > MAX_PATH_CHARS:
        raise _refused(f"item {n}: {what} must be a path of 1 to {MAX_PATH_CHARS} characters")
    if not value.isprintable():
        raise _refused(f"item {n}: {what} holds a control character")
    path = PurePosixPath(value)
    if not path.is_absolute() or ".." in path.parts or str(path) != value:
        raise _refused(f"item {n}: {what} must be an absolute, normalised path")
    return path


def corpus_files(raw: str, names: list[str]) -> list[CorpusFile]:
    """The corpus location of each file, in order; raises ApiError (422 naming ``corpus``)."""
    try:
        items = json.loads(raw)
    except ValueError:
        raise _refused("not JSON") from None
    if not isinstance(items, list) or len(items) != len(names):
        raise _refused("must be a list with one {path, root} object per file, in order")
    out: list[CorpusFile] = []
    for n, (item, name) in enumerate(zip(items, names, strict=True)):
        if not isinstance(item, dict) or set(item) != {"path", "root"}:
            raise _refused(f"item {n}: must be an object with path and root")
        path, root = _clean(item["path"], "path", n), _clean(item["root"], "root", n)
        if root not in path.parents:
            raise _refused(f"item {n}: path must be under root")
        if path.name != name:
            raise _refused(f"item {n}: path must end with the file's name")
        out.append(CorpusFile(str(path), str(root)))
    return out
