"""Every vLLM the bundle runs ends up with an API key, by vLLM's own parsing rule.

The check does not look for a string in our YAML: it renders the Vault agent's
template for the file, splits the container's command line as the kernel/shell
hands it to vLLM, and applies vLLM's ``--config`` expansion (tests/deploy/upstream.py,
from vllm/utils/argparse_utils.py at commit 00da11e3) to see which keys vLLM gets.
"""

from __future__ import annotations

from typing import Any

import deploy_support as ds
import pytest
import upstream
from deploy_support import Rendering

KEY = "k-current-0123"
PREVIOUS = "k-previous-4567"


def _vllm_servers(renderings: dict[str, Rendering]) -> list[tuple[str, ds.Workload, dict[str, Any], list[str]]]:
    out = []
    for r in renderings.values():
        for w in ds.workloads(r.docs):
            for c in w.pod.spec.get("containers") or []:
                argv = upstream.vllm_argv(c)
                if argv is not None:
                    out.append((r.name, w, c, argv))
    return out


def _secrets(annotations: dict[str, str], **fields: str) -> dict[str, dict[str, str]]:
    prefix = "vault.hashicorp.com/agent-inject-secret-"
    return {path: dict(fields) for key, path in annotations.items() if key.startswith(prefix)}


def test_every_vllm_rendering_is_found(renderings: dict[str, Rendering]) -> None:
    found = {(name, w.name) for name, w, _c, _a in _vllm_servers(renderings)}
    # base vLLM, the embed-server component and the LWS leader: the three renderings of #18.1.
    assert ("base", "docquery-vllm") in found
    assert ("component-embed-server", "docquery-vllm-embed") in found
    assert ("component-multinode-vllm", "docquery-vllm-lws") in found
    assert ("overlay-prod", "docquery-vllm") in found


def test_vllm_reads_its_key_from_the_config_file(renderings: dict[str, Rendering]) -> None:
    problems = []
    for name, w, _c, argv in _vllm_servers(renderings):
        files = upstream.agent_files(w.pod.annotations, _secrets(w.pod.annotations, value=KEY))
        if any(a.startswith("--config=") for a in argv):
            problems.append(f"{name}/{w.name}: '--config=FILE' is one token; vLLM ignores the file")
        expanded = upstream.vllm_expand_config(argv, files)
        keys = upstream.vllm_api_keys(expanded)
        if keys != [KEY]:
            problems.append(f"{name}/{w.name}: vLLM would run with api keys {keys} (argv {argv})")
    assert not problems, "\n".join(problems)


def test_the_previous_key_stays_valid_during_a_rotation(renderings: dict[str, Rendering]) -> None:
    """vLLM reads its key once at start; a `previous` field in the secret keeps the old key
    accepted (api_key is a list) until the next restart drops it."""
    for name, w, _c, argv in _vllm_servers(renderings):
        files = upstream.agent_files(w.pod.annotations, _secrets(w.pod.annotations, value=KEY, previous=PREVIOUS))
        assert upstream.vllm_api_keys(upstream.vllm_expand_config(argv, files)) == [KEY, PREVIOUS], (name, w.name)


HOSTILE_KEYS = [
    'a"b',
    "a\nenable-log-requests: true",
    "x: y",
    "- z",
    "{}",
    "[1, 2]",
    "'quoted'",
    "#comment",
    "a\\nb",
    "true",
    "  leading space",
    "tab\there",
]


@pytest.mark.parametrize("hostile", HOSTILE_KEYS)
def test_a_key_value_cannot_add_vllm_options(renderings: dict[str, Rendering], hostile: str) -> None:
    """The key is data, not config: whatever the secret holds, vLLM gets exactly it as the key."""
    _name, w, _c, argv = next(s for s in _vllm_servers(renderings) if s[0] == "base")
    files = upstream.agent_files(w.pod.annotations, _secrets(w.pod.annotations, value=hostile))
    expanded = upstream.vllm_expand_config(argv, files)
    assert "--enable-log-requests" not in expanded
    assert upstream.vllm_api_keys(expanded) == [hostile]


def test_the_old_single_token_form_would_be_ignored() -> None:
    """The emulation itself: vLLM's rule reads the file for `--config FILE`, never for `--config=FILE`."""
    files = {"/vault/secrets/c.yaml": "api-key: k"}
    one_token = upstream.vllm_expand_config(["serve", "/m", "--config=/vault/secrets/c.yaml"], files)
    two_tokens = upstream.vllm_expand_config(["serve", "/m", "--config", "/vault/secrets/c.yaml"], files)
    assert upstream.vllm_api_keys(one_token) == []
    assert upstream.vllm_api_keys(two_tokens) == ["k"]


def test_a_dash_leading_key_would_be_read_as_an_option() -> None:
    """Why the README asks for hex keys: argparse takes a '-'-prefixed value for a flag."""
    files = {"/vault/secrets/c.yaml": 'api-key: ["--enable-log-requests"]'}
    expanded = upstream.vllm_expand_config(["serve", "/m", "--config", "/vault/secrets/c.yaml"], files)
    assert upstream.vllm_api_keys(expanded) == []


def test_readme_smoke_tests_the_key() -> None:
    readme = (ds.K8S / "README.md").read_text()
    assert "/v1/models" in readme and "401" in readme
    assert "openssl rand -hex 32" in readme
