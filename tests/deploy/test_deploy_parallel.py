"""The two multinode layouts: what vLLM and the LWS controller do with them.

Pipeline-parallel (multinode-vllm) and tensor-parallel (multinode-vllm-tp), both one
GPU per pod over Ray, both gang-scheduled. Checked against facts/vllm-lws.yaml: the
arguments vLLM's parser declares, and the variables LWS sets on every container.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import deploy_support as ds
import pytest
import upstream
import yaml
from deploy_support import Rendering

FACTS = yaml.safe_load((Path(__file__).parent / "facts" / "vllm-lws.yaml").read_text())
ARGS: dict[str, list[str]] = FACTS["vllm"]["args"]
LAYOUTS = {"component-multinode-vllm": (1, 2), "component-multinode-vllm-tp": (2, 1)}
_VAR = re.compile(r"\$\{(\w+)\}|\$(\w+)")


def _env(r: Rendering, container: dict[str, Any]) -> dict[str, str]:
    env = {e["name"]: str(e.get("value", "")) for e in container.get("env") or []}
    for ref in container.get("envFrom") or []:
        if "configMapRef" in ref:
            env.update(r.get("ConfigMap", ref["configMapRef"]["name"])["data"])
    return env


def _lws_env(lws: dict[str, Any]) -> dict[str, str]:
    """What AddLWSVariables sets (pod_utils.go), for group 0 of a Shared-subdomain LWS."""
    name, ns = lws["metadata"]["name"], lws["metadata"]["namespace"]
    return {
        "LWS_LEADER_ADDRESS": f"{name}-0.{name}.{ns}",
        "LWS_GROUP_SIZE": str(lws["spec"]["leaderWorkerTemplate"]["size"]),
        "LWS_WORKER_INDEX": "0",
    }


def expand(word: str, env: dict[str, str]) -> str:
    def sub(m: re.Match[str]) -> str:
        var = m.group(1) or m.group(2)
        assert var in env, f"${var} is set by nothing: not in the container's env, nor an LWS variable"
        return env[var]

    return _VAR.sub(sub, word)


def parse_vllm(argv: list[str]) -> dict[str, str | bool]:
    """The options of `vllm serve MODEL ...`, each checked against the declared arguments."""
    assert argv[:1] == ["serve"] and not argv[1].startswith("-"), argv
    out: dict[str, str | bool] = {}
    i = 2
    while i < len(argv):
        word = argv[i]
        assert word.startswith("--"), f"stray word {word!r} in vllm serve's arguments"
        name, eq, value = word.partition("=")
        assert name in ARGS, f"vLLM argument {name} is not in facts/vllm-lws.yaml"
        kind = ARGS[name][0]
        if kind == "flag":
            assert not eq, word
            out[name] = True
            i += 1
            continue
        if not eq:
            value = argv[i + 1]
            i += 1
        if kind == "int":
            assert value.isdigit(), f"{name}={value!r} is not an int"
        if name in FACTS["vllm"]["choices"]:
            assert value in FACTS["vllm"]["choices"][name], f"{name}={value!r}"
        out[name] = value
        i += 1
    return out


def _leader_worker(lws: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    t = lws["spec"]["leaderWorkerTemplate"]
    return t["leaderTemplate"]["spec"]["containers"][0], t["workerTemplate"]["spec"]["containers"][0]


def _gpus_per_pod(r: Rendering, spec: dict[str, Any]) -> int:
    c = spec["containers"][0]
    limits = (c.get("resources") or {}).get("limits") or {}
    if "nvidia.com/gpu" in limits:
        return int(limits["nvidia.com/gpu"])
    claims = [r.get("ResourceClaimTemplate", x["resourceClaimTemplateName"]) for x in spec.get("resourceClaims") or []]
    return sum(req["exactly"]["count"] for ct in claims for req in ct["spec"]["spec"]["devices"]["requests"])


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_layout_uses_every_gpu_of_the_group_once(renderings: dict[str, Rendering], name: str) -> None:
    r = renderings[name]
    [lws] = r.of_kind("LeaderWorkerSet")
    leader, _worker = _leader_worker(lws)
    env = {**_env(r, leader), **_lws_env(lws)}
    opts = parse_vllm([expand(w, env) for w in upstream.vllm_argv(leader) or []])
    tp, pp = int(str(opts["--tensor-parallel-size"])), int(str(opts["--pipeline-parallel-size"]))
    assert (tp, pp) == LAYOUTS[name]
    assert opts["--distributed-executor-backend"] == "ray"
    size = lws["spec"]["leaderWorkerTemplate"]["size"]
    gpus = _gpus_per_pod(r, lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"])
    assert gpus == _gpus_per_pod(r, lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]) == 1
    assert tp * pp == size * gpus, f"vLLM wants {tp * pp} GPUs, the group has {size * gpus}"


def _ray_port(script: str, flag: str) -> int:
    words = shlex.split(script.replace("\\\n", " "), comments=True)
    starts = [i for i in range(len(words) - 1) if words[i : i + 2] == ["ray", "start"]]
    assert len(starts) == 1, "one ray start per container"
    rest = words[starts[0] + 2 :]
    for w in rest:
        if w.startswith(flag + "="):
            return int(w.split("=", 1)[1].rsplit(":", 1)[-1])
    raise AssertionError(f"ray start without {flag}")


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_ray_start_matches_the_lws_environment(renderings: dict[str, Rendering], name: str) -> None:
    r = renderings[name]
    [lws] = r.of_kind("LeaderWorkerSet")
    leader, worker = _leader_worker(lws)
    lws_vars = set(FACTS["lws"]["env"])
    for c in (leader, worker):
        text = " ".join([*c.get("args", []), *((c.get("livenessProbe") or {}).get("exec") or {}).get("command", [])])
        used = {a or b for a, b in _VAR.findall(text)}
        declared = set(_env(r, c)) | lws_vars
        # Shell locals of the leader's wait loop are assigned in the script itself.
        undeclared = {v for v in used - declared if not re.search(rf"\b{v}=", text) and v != "_"}
        assert not undeclared, f"{c['name']}: {sorted(undeclared)} set by neither the pod nor LWS"
        assert {v for v in used if v.startswith("LWS_")} <= lws_vars
    head_port = _ray_port(leader["args"][0], "--port")
    env = {**_env(r, worker), **_lws_env(lws)}
    join = expand(worker["args"][0], env)
    assert _ray_port(join, "--address") == head_port
    assert f"--address={lws['metadata']['name']}-0.{lws['metadata']['name']}.docquery:{head_port}" in shlex.split(join)
    # The leader waits for LWS_GROUP_SIZE Ray nodes before vLLM places TP x PP workers.
    assert '-ge "${LWS_GROUP_SIZE}"' in leader["args"][0]


def test_the_parser_emulation_refuses_what_vllm_would() -> None:
    good = ["serve", "/m", "--tensor-parallel-size=2", "--distributed-executor-backend", "ray"]
    assert parse_vllm(good)["--tensor-parallel-size"] == "2"
    for bad in (
        ["serve", "/m", "--tensor-parallel=2"],  # not an argument
        ["serve", "/m", "--tensor-parallel-size=two"],
        ["serve", "/m", "--distributed-executor-backend=slurm"],
        ["serve", "/m", "--disable-fastapi-docs=1"],
    ):
        with pytest.raises(AssertionError):
            parse_vllm(bad)
    with pytest.raises(AssertionError, match="set by nothing"):
        expand("--pipeline-parallel-size=${PP}", {})


def test_both_layouts_are_gang_scheduled(renderings: dict[str, Rendering]) -> None:
    for name in LAYOUTS:
        r = renderings[name]
        [lws] = r.of_kind("LeaderWorkerSet")
        t = lws["spec"]["leaderWorkerTemplate"]
        groups = {t[p]["spec"]["schedulingGroup"]["podGroupName"] for p in ("leaderTemplate", "workerTemplate")}
        [group] = groups
        assert r.get("PodGroup", group)["spec"]["schedulingPolicy"]["gang"]["minCount"] == t["size"]
        assert r.of_kind("Workload"), name


def test_readme_cites_vllm_guidance_for_the_choice() -> None:
    readme = (ds.K8S / "README.md").read_text()
    assert "multinode-vllm-tp" in readme
    assert "distributed_serving" in readme
