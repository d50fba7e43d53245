#!/usr/bin/env python3
"""Compare every image pin of the bundle with what its registry serves for the tag.

    python3 deploy/k8s/resolve-pins.py [--tool auto|crane|skopeo|api] [--write]

Reads components/release-images/kustomization.yaml: each `images:` entry's
newName:newTag and digest, and every `name:tag@sha256:...` value in its patches
(the Vault agent image). Resolves each tag to the digest of what the registry
serves for it (the multi-platform index where there is one, which is what the
runtime resolves too) with crane, skopeo, or the registry's HTTP API. Prints one
line per image; with --write, replaces the digests that differ in place (comments
kept). Exit 0 when every pin matches, 1 when one differs, has no tag or cannot be
resolved, 2 on a usage error. Needs network access to the registries and PyYAML.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PINS = Path(__file__).resolve().parent / "components" / "release-images" / "kustomization.yaml"
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
PINNED_REF = re.compile(r"(?P<repo>[\w.\-/:]+?):(?P<tag>[\w][\w.\-]{0,127})@(?P<digest>sha256:[0-9a-f]{64})")
ACCEPT = ", ".join(
    [
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    ]
)
TIMEOUT_S = 30


class ResolveError(Exception):
    pass


@dataclass(frozen=True)
class Pin:
    repo: str  # e.g. docker.io/qdrant/qdrant
    tag: str | None
    digest: str

    @property
    def ref(self) -> str:
        return f"{self.repo}:{self.tag}"


def load_pins(text: str) -> list[Pin]:
    import yaml  # only here: the rest of the script needs no third-party package

    doc = yaml.safe_load(text) or {}
    pins: list[Pin] = []
    for entry in doc.get("images") or []:
        digest = str(entry.get("digest", ""))
        if not DIGEST.match(digest):
            raise ResolveError(f"image {entry.get('name')!r}: digest {digest!r} is not sha256:<64 hex>")
        tag = entry.get("newTag")
        pins.append(Pin(str(entry.get("newName") or entry["name"]), str(tag) if tag is not None else None, digest))
    for patch in doc.get("patches") or []:
        for m in PINNED_REF.finditer(str(patch.get("patch", ""))):
            pin = Pin(m["repo"], m["tag"], m["digest"])
            if pin not in pins:
                pins.append(pin)
    return pins


def split_ref(repo: str) -> tuple[str, str]:
    """(registry host, repository path) the way Docker names them."""
    first, _, rest = repo.partition("/")
    if not rest or ("." not in first and ":" not in first and first != "localhost"):
        return "registry-1.docker.io", repo if rest else f"library/{repo}"
    if first == "docker.io":
        return "registry-1.docker.io", rest if "/" in rest else f"library/{rest}"
    return first, rest


# ---- resolvers ---------------------------------------------------------------------------

Runner = Callable[[list[str]], tuple[int, bytes]]


def _run(cmd: list[str]) -> tuple[int, bytes]:
    try:
        # The operator's crane/skopeo with an image reference from the pins file.
        proc = subprocess.run(cmd, capture_output=True, check=False, timeout=120)  # noqa: S603
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ResolveError(f"cannot run {cmd[0]}: {type(exc).__name__}") from None
    return proc.returncode, proc.stdout


def resolve_crane(pin: Pin, run: Runner = _run) -> str:
    rc, out = run(["crane", "digest", pin.ref])
    digest = out.decode().strip()
    if rc != 0 or not DIGEST.match(digest):
        raise ResolveError(f"crane digest {pin.ref} failed")
    return digest


def resolve_skopeo(pin: Pin, run: Runner = _run) -> str:
    """The digest of the raw manifest (the index for a multi-platform image)."""
    rc, out = run(["skopeo", "inspect", "--raw", f"docker://{pin.ref}"])
    if rc != 0 or not out:
        raise ResolveError(f"skopeo inspect {pin.ref} failed")
    return "sha256:" + hashlib.sha256(out).hexdigest()


Opener = Callable[[urllib.request.Request], Any]


def _open(req: urllib.request.Request) -> Any:
    return urllib.request.urlopen(req, timeout=TIMEOUT_S)  # noqa: S310 - https registry URLs


def _challenge(header: str) -> dict[str, str]:
    """Bearer realm="...",service="...",scope="..." -> its parameters."""
    scheme, _, params = header.partition(" ")
    if scheme.lower() != "bearer":
        raise ResolveError(f"registry asks for {scheme} auth; use crane or skopeo with your credentials")
    return dict(re.findall(r'(\w+)="([^"]*)"', params))


def resolve_api(pin: Pin, opener: Opener = _open, scheme: str = "https") -> str:
    """HEAD /v2/<repo>/manifests/<tag>, with an anonymous token when the registry asks."""
    host, path = split_ref(pin.repo)
    url = f"{scheme}://{host}/v2/{path}/manifests/{urllib.parse.quote(pin.tag or '', safe='')}"
    headers = {"Accept": ACCEPT}
    for _attempt in range(2):
        req = urllib.request.Request(url, method="HEAD", headers=headers)  # noqa: S310
        try:
            with opener(req) as resp:
                digest = resp.headers.get("Docker-Content-Digest", "")
                if not DIGEST.match(digest):
                    raise ResolveError(f"{pin.ref}: the registry sent no Docker-Content-Digest")
                return str(digest)
        except urllib.error.HTTPError as exc:
            if exc.code != 401 or "Authorization" in headers:
                raise ResolveError(f"{pin.ref}: HTTP {exc.code} from {host}") from None
            params = _challenge(exc.headers.get("WWW-Authenticate", ""))
            query = urllib.parse.urlencode({k: v for k, v in params.items() if k in ("service", "scope")})
            token_req = urllib.request.Request(f"{params['realm']}?{query}")  # noqa: S310
            try:
                with opener(token_req) as resp:
                    body = json.load(resp)
            except (urllib.error.URLError, ValueError):
                raise ResolveError(f"{pin.ref}: no anonymous token from {host}") from None
            headers["Authorization"] = f"Bearer {body.get('token') or body.get('access_token')}"
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            raise ResolveError(f"{pin.ref}: {host} unreachable ({type(exc).__name__})") from None
    raise ResolveError(f"{pin.ref}: not authorized at {host}")


RESOLVERS: dict[str, Callable[[Pin], str]] = {"crane": resolve_crane, "skopeo": resolve_skopeo, "api": resolve_api}


def pick_tool(choice: str) -> str:
    if choice != "auto":
        return choice
    return next((t for t in ("crane", "skopeo") if shutil.which(t)), "api")


# ---- compare and rewrite -----------------------------------------------------------------


def check(pins: list[Pin], resolve: Callable[[Pin], str]) -> tuple[list[str], dict[str, str]]:
    """One line per pin, and old digest -> new digest for those that differ."""
    lines: list[str] = []
    changes: dict[str, str] = {}
    for pin in pins:
        if pin.tag is None:
            lines.append(f"no tag   {pin.repo}@{pin.digest}: set newTag to the release you deploy")
            continue
        try:
            actual = resolve(pin)
        except ResolveError as exc:
            lines.append(f"error    {exc}")
            continue
        if actual == pin.digest:
            lines.append(f"ok       {pin.ref}@{actual}")
        elif changes.get(pin.digest, actual) != actual:
            # Two images share one (placeholder) pin: a text rewrite cannot tell them apart.
            lines.append(f"error    {pin.ref}: its pin {pin.digest} is also another image's; edit it by hand")
        else:
            lines.append(f"differs  {pin.ref}: pinned {pin.digest}, registry {actual}")
            changes[pin.digest] = actual
    return lines, changes


def rewrite(text: str, changes: dict[str, str]) -> str:
    for old, new in changes.items():
        text = text.replace(old, new)
    return text


def main(argv: list[str] | None = None, resolver: Callable[[Pin], str] | None = None, pins_file: Path = PINS) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tool", choices=["auto", *RESOLVERS], default="auto")
    parser.add_argument("--write", action="store_true", help="replace the digests that differ")
    args = parser.parse_args(argv)
    try:
        text = pins_file.read_text()
        pins = load_pins(text)
    except (OSError, ResolveError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    except ImportError:
        sys.stderr.write("error: PyYAML is needed (pip install pyyaml, or run with the project's venv)\n")
        return 2
    lines, changes = check(pins, resolver or RESOLVERS[pick_tool(args.tool)])
    sys.stdout.write("".join(line + "\n" for line in lines))
    if args.write and changes:
        pins_file.write_text(rewrite(text, changes))
        sys.stdout.write(f"rewrote {len(changes)} digest(s) in {pins_file}\n")
    return 0 if all(line.startswith("ok ") for line in lines) else 1


if __name__ == "__main__":
    sys.exit(main())
