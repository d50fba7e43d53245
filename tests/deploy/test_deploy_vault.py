"""The Vault wiring of the manifests agrees with the HCL policies in policies/vault/ and the README."""

from __future__ import annotations

import fnmatch
import re

import deploy_support as ds
from deploy_support import Rendering

VAULT = "vault.hashicorp.com/"


def _readable_paths(role: str) -> list[str]:
    hcl = (ds.POLICIES / "vault" / f"{role.removeprefix('docquery-')}.hcl").read_text()
    out = []
    for path, body in re.findall(r'path\s+"([^"]+)"\s*\{(.*?)\}', hcl, flags=re.S):
        if '"read"' in body:
            out.append(path)
    return out


def test_every_rendered_secret_path_is_readable_by_its_role(renderings: dict[str, Rendering]) -> None:
    problems = []
    for r in renderings.values():
        for w in ds.workloads(r.docs):
            a = w.pod.annotations
            role = a.get(VAULT + "role")
            if not role:
                continue
            allowed = _readable_paths(role)
            for key, path in a.items():
                if key.startswith(VAULT + "agent-inject-secret-"):
                    if not any(fnmatch.fnmatchcase(path, glob) for glob in allowed):
                        problems.append(f"{r.name}/{w.name}: role {role} cannot read {path}")
                    template = a.get(VAULT + "agent-inject-template-" + key.rsplit("agent-inject-secret-", 1)[1], "")
                    assert f'secret "{path}"' in template, (w.name, key)
    assert not problems, "\n".join(problems)


def test_readme_documents_every_role_in_use(renderings: dict[str, Rendering]) -> None:
    readme = (ds.K8S / "README.md").read_text()
    roles = {
        w.pod.annotations[VAULT + "role"]
        for r in renderings.values()
        for w in ds.workloads(r.docs)
        if VAULT + "role" in w.pod.annotations
    }
    assert roles == {"docquery-query", "docquery-ingest", "docquery-vllm", "docquery-qdrant"}
    for role in roles:
        assert f"| `{role}` |" in readme, role
        assert (ds.POLICIES / "vault" / f"{role.removeprefix('docquery-')}.hcl").is_file()


def test_readme_describes_every_component() -> None:
    readme = (ds.K8S / "README.md").read_text()
    for name in [*ds.component_names(), "release-images"]:
        assert f"| `{name}` |" in readme, name
