"""What the components do with our manifests, emulated from their upstream source.

A check that only looks at the shape of our own YAML proves little; these
helpers re-state, in a few lines each, the rule a component applies to it.
Each names the upstream file and version it was read from (no upstream code is
copied: the rules are re-written from reading it).
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

import yaml
from deploy_support import dq_podspec

# ---- consul-template (what the Vault agent renders into /vault/secrets) -------------

_ACTION = re.compile(r"\{\{(-?)\s*(.*?)\s*(-?)\}\}", re.S)
_FIELD = re.compile(r"^\.Data\.data\.(\w+)$")


def render_agent_template(template: str, secrets: dict[str, dict[str, str]]) -> str:
    """The subset of consul-template the bundle uses: ``with secret "p"``, ``with .Data.data.f``,
    ``.Data.data.f`` (optionally ``| toJSON``), ``.``, ``end`` and the ``{{-``/``-}}`` whitespace trims."""
    out: list[str] = []
    # Stack of (context, emitting) frames; context is the secret's fields or a scalar.
    stack: list[tuple[Any, bool]] = [(None, True)]
    pos = 0
    trim_next = False
    for m in _ACTION.finditer(template):
        text = template[pos : m.start()]
        if trim_next:
            text = text.lstrip()
        if m.group(1):
            text = text.rstrip()
        if stack[-1][1]:
            out.append(text)
        pos = m.end()
        trim_next = bool(m.group(3))
        action = m.group(2)
        ctx, emitting = stack[-1]
        if action.startswith("with secret "):
            path = shlex.split(action)[2]
            stack.append((secrets.get(path, {}), emitting and path in secrets))
        elif action.startswith("with "):
            value = _lookup(ctx, action[5:].strip())
            stack.append((value, emitting and bool(value)))
        elif action == "end":
            stack.pop()
        elif emitting:
            expr, _, func = (part.strip() for part in action.partition("|"))
            value = _lookup(ctx, expr)
            assert func in ("", "toJSON"), f"unsupported template function {func!r}"
            out.append(json.dumps(value) if func == "toJSON" else str(value))
    tail = template[pos:]
    out.append(tail.lstrip() if trim_next else tail)
    assert len(stack) == 1, "unbalanced with/end in agent template"
    return "".join(out)


def _lookup(ctx: Any, expr: str) -> Any:
    if expr == ".":
        return ctx
    m = _FIELD.match(expr)
    assert m, f"unsupported template action {expr!r}"
    return (ctx or {}).get(m.group(1), "")


def agent_files(annotations: dict[str, str], secrets: dict[str, dict[str, str]]) -> dict[str, str]:
    """File path -> rendered content, for every agent-inject-template-<name> annotation.

    vault-k8s v1.7.6 (commit fbc5b1f0), agent-inject/agent/annotations.go: the file
    <name> lands in vault.hashicorp.com/secret-volume-path (default /vault/secrets).
    """
    prefix = "vault.hashicorp.com/agent-inject-template-"
    base = annotations.get("vault.hashicorp.com/secret-volume-path", "/vault/secrets")
    return {
        f"{base}/{key[len(prefix) :]}": render_agent_template(value, secrets)
        for key, value in annotations.items()
        if key.startswith(prefix)
    }


# ---- vLLM: how `vllm serve` reads its command line -------------------------------------


def vllm_argv(container: dict[str, Any]) -> list[str] | None:
    """The argv after ``vllm`` for a container that runs ``vllm serve`` (shared with checkov)."""
    return dq_podspec.vllm_serve_argv(container)


def vllm_expand_config(argv: list[str], files: dict[str, str]) -> list[str]:
    """vLLM's own rule for ``--config`` (vllm-project/vllm, vllm/utils/argparse_utils.py at
    commit 00da11e3, FlexibleArgumentParser.parse_args / _pull_args_from_config /
    load_config_file): the file is read only when the exact token ``--config`` is in argv
    (``--config=FILE`` is not), the next token is the path, at most one ``--config``, the
    file must end in .yaml/.yml; each key becomes ``--key value`` (a list becomes
    ``--key v1 v2 ...``), inserted after ``serve <model>``."""
    if "--config" not in argv:
        return list(argv)
    assert argv.count("--config") == 1, "More than one config file specified!"
    index = argv.index("--config")
    assert index < len(argv) - 1, "No config file specified!"
    path = argv[index + 1]
    assert path.rsplit(".", 1)[-1] in ("yaml", "yml"), f"config file must be yaml: {path}"
    assert path in files, f"vLLM would fail to open {path}: nothing renders it"
    config = yaml.safe_load(files[path]) or {}
    extra: list[str] = []
    for key, value in config.items():
        if isinstance(value, bool):
            if value:
                extra.append(f"--{key}")
        elif isinstance(value, list):
            if value:
                extra += [f"--{key}", *(str(v) for v in value)]
        else:
            extra += [f"--{key}", str(value)]
    model_in_cli = argv[0] == "serve" and len(argv) > 1 and not argv[1].startswith("-")
    head = 2 if model_in_cli else 1
    return argv[:head] + extra + argv[head:index] + argv[index + 2 :]


def _looks_like_option(word: str) -> bool:
    """argparse (CPython 3.12 argparse._parse_optional): '-'-prefixed words are options,
    except '-' itself, negative numbers and words containing a space."""
    if not word.startswith("-") or word == "-" or " " in word:
        return False
    return not re.fullmatch(r"-\d+$|-\d*\.\d+$", word)


def vllm_api_keys(expanded: list[str]) -> list[str]:
    """The keys vLLM ends up with: ``--api-key`` takes one or more values (FrontendArgs.api_key
    is ``list[str] | None`` in vllm/entrypoints/openai/cli_args.py at the same commit)."""
    keys: list[str] = []
    for i, word in enumerate(expanded):
        if word in {"--api-key", "--api_key"}:
            j = i + 1
            while j < len(expanded) and not _looks_like_option(expanded[j]):
                keys.append(expanded[j])
                j += 1
        elif word.startswith("--api-key="):
            keys.append(word.split("=", 1)[1])
    return keys


# ---- Vault Agent Injector: what the mutating webhook adds to a pod ----------------------

VAULT = "vault.hashicorp.com/"
# vault-k8s v1.7.6 (commit fbc5b1f0), agent-inject/agent/agent.go and container_sidecar.go.
INJECTOR_DEFAULT_IMAGE = "hashicorp/vault:2.0.4"
INJECTOR_DEFAULT_RESOURCES = {
    "requests": {"cpu": "250m", "memory": "64Mi"},
    "limits": {"cpu": "500m", "memory": "128Mi"},
}
INJECTOR_ENV = ("NAMESPACE", "HOST_IP", "POD_IP", "VAULT_LOG_LEVEL", "VAULT_LOG_FORMAT", "VAULT_CONFIG")
INJECTOR_SA_MOUNT = "/var/run/secrets/vault.hashicorp.com/serviceaccount"
INJECTED_CONTAINERS = ("vault-agent-init", "vault-agent")
INJECTED_VOLUMES = ("vault-secrets", "home-init", "home-sidecar")
# container_volume.go: the Secret named by vault.hashicorp.com/tls-secret, for the agents.
TLS_VOLUME, TLS_MOUNT = "vault-tls-secrets", "/vault/tls"


def _agent_resources(a: dict[str, str]) -> dict[str, dict[str, str]]:
    """parseResources: each of requests/limits cpu/mem/ephemeral from its annotation; the
    injector fills cpu and mem from its defaults when the annotation is absent."""
    out: dict[str, dict[str, str]] = {"requests": {}, "limits": {}}
    for section, word in (("requests", "requests"), ("limits", "limits")):
        for res, suffix in (("cpu", "cpu"), ("memory", "mem"), ("ephemeral-storage", "ephemeral")):
            value = a.get(f"{VAULT}agent-{word}-{suffix}") or INJECTOR_DEFAULT_RESOURCES[section].get(res)
            if value:
                out[section][res] = value
    return out


def inject_vault_agent(kind_name: str, pod_template: dict[str, Any], namespace: str) -> dict[str, Any]:
    """The Pod that admission (and so Kyverno) sees after the injector's patch (agent.go Patch).

    - volumes: home-init (when pre-populating), home-sidecar (unless pre-populate-only),
      vault-secrets: all emptyDir medium Memory, no sizeLimit (container_volume.go);
    - vault-secrets mounted at secret-volume-path in the agent-inject-containers;
    - init container vault-agent-init appended to initContainers (unless agent-init-first),
      sidecar vault-agent appended to containers (unless pre-populate-only);
    - agent image from vault.hashicorp.com/agent-image, else the injector's default tag;
    - agent securityContext: runAsUser/Group from the annotations, runAsNonRoot, read-only
      root, drop ALL, no privilege escalation, and no seccompProfile (securityContext());
    - the projected token volume named by agent-service-account-token-volume-name is mounted
      read-only at the default service-account mount (serviceaccount()).
    """
    import copy

    meta = copy.deepcopy(pod_template.get("metadata") or {})
    spec = copy.deepcopy(pod_template.get("spec") or {})
    a = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    meta["name"] = f"{kind_name}-injected"
    meta["namespace"] = namespace
    if a.get(VAULT + "agent-inject") != "true":
        return pod
    pre_populate = a.get(VAULT + "agent-pre-populate", "true") == "true"
    only = a.get(VAULT + "agent-pre-populate-only", "false") == "true"
    secret_path = a.get(VAULT + "secret-volume-path", "/vault/secrets")
    memory = {"emptyDir": {"medium": "Memory"}}
    volumes = spec.setdefault("volumes", [])
    if pre_populate:
        volumes.append({"name": "home-init", **copy.deepcopy(memory)})
    if not only:
        volumes.append({"name": "home-sidecar", **copy.deepcopy(memory)})
    volumes.append({"name": "vault-secrets", **copy.deepcopy(memory)})
    tls_secret = a.get(VAULT + "tls-secret")
    if tls_secret:  # agent.go Patch, container_volume.go ContainerTLSSecretVolume: mounted in the agents only
        volumes.append({"name": TLS_VOLUME, "secret": {"secretName": tls_secret}})
    targets = [t.strip() for t in a.get(VAULT + "agent-inject-containers", "").split(",") if t.strip()]
    secrets_mount = {"name": "vault-secrets", "mountPath": secret_path, "readOnly": False}
    for c in spec.get("containers") or []:
        if not targets or c["name"] in targets:
            c.setdefault("volumeMounts", []).append(dict(secrets_mount))
    token_volume = a.get(VAULT + "agent-service-account-token-volume-name")
    assert token_volume and any(v["name"] == token_volume for v in volumes), "Validate(): no token volume"
    uid, gid = int(a.get(VAULT + "agent-run-as-user", "100")), int(a.get(VAULT + "agent-run-as-group", "1000"))

    def agent(name: str, home: str) -> dict[str, Any]:
        return {
            "name": name,
            "image": a.get(VAULT + "agent-image", INJECTOR_DEFAULT_IMAGE),
            "command": ["/bin/sh", "-ec"],
            "args": ["echo ${VAULT_CONFIG?} | base64 -d > /home/vault/config.json && vault agent -config=..."],
            "env": [{"name": n, "value": "x"} for n in INJECTOR_ENV],  # container_env.go, no ConfigMap
            "resources": _agent_resources(a),
            "securityContext": {
                "runAsUser": uid,
                "runAsGroup": gid,
                "runAsNonRoot": uid != 0 and gid != 0,
                "readOnlyRootFilesystem": True,
                "capabilities": {"drop": ["ALL"]},
                "allowPrivilegeEscalation": False,
            },
            "volumeMounts": [
                {"name": home, "mountPath": "/home/vault", "readOnly": False},
                {"name": token_volume, "mountPath": INJECTOR_SA_MOUNT, "readOnly": True},
                dict(secrets_mount),
                *([{"name": TLS_VOLUME, "mountPath": TLS_MOUNT, "readOnly": True}] if tls_secret else []),
            ],
        }

    if pre_populate:
        init = agent("vault-agent-init", "home-init")
        if a.get(VAULT + "agent-init-first") == "true":
            spec["initContainers"] = [init, *(spec.get("initContainers") or [])]
        else:
            spec.setdefault("initContainers", []).append(init)
    if not only:
        spec["containers"].append(agent("vault-agent", "home-sidecar"))
    return pod
