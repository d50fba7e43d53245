#!/usr/bin/env bash
# Installs the deployment checkers into their own venvs under .venv-tools/.
# Each tool gets a venv of its own: checkov conflicts with the project's pins
# (networkx, packaging), and nca / kubernetes-validate are kept apart so that an
# upgrade of one never moves another. Idempotent: a venv whose pinned version is
# already installed is left alone.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="${ROOT}/.venv-tools"
PYTHON="${PYTHON:-python3.11}"
command -v "${PYTHON}" >/dev/null 2>&1 || PYTHON=python3

CHECKOV_VERSION="3.3.30"
NCA_VERSION="2.1.0"
KVALIDATE_VERSION="1.37.0"
# Parses the JMESPath expressions of the Kyverno policies (syntax only; no Kyverno CLI here).
JMESPATH_VERSION="1.1.0"

# install_tool <venv-name> <dist-name> <version> <binary> [extra pinned requirement...]
install_tool() {
    local name="$1" dist="$2" version="$3" binary="$4"
    shift 4
    local extras=("$@")
    local venv="${TOOLS}/${name}"
    local installed=""
    if [[ -x "${venv}/bin/python" ]]; then
        # Captured first: `pip show | grep -q` under pipefail fails on SIGPIPE.
        installed="$("${venv}/bin/python" -m pip show "${dist}" 2>/dev/null || true)"
    fi
    local extras_ok=1 req
    for req in "${extras[@]}"; do
        local shown=""
        [[ -x "${venv}/bin/python" ]] && shown="$("${venv}/bin/python" -m pip show "${req%%==*}" 2>/dev/null || true)"
        if ! grep -qx "Version: ${req##*==}" <<<"${shown}"; then
            extras_ok=0
        fi
    done
    if [[ -x "${venv}/bin/${binary}" ]] && [[ "${extras_ok}" -eq 1 ]] \
        && grep -qx "Version: ${version}" <<<"${installed}"; then
        echo "setup-tools: ${dist}==${version} already in ${venv}"
        return 0
    fi
    echo "setup-tools: installing ${dist}==${version} into ${venv}"
    "${PYTHON}" -m venv "${venv}"
    "${venv}/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
    "${venv}/bin/python" -m pip install -q --disable-pip-version-check "${dist}==${version}" "${extras[@]}"
    test -x "${venv}/bin/${binary}"
}

mkdir -p "${TOOLS}"
install_tool checkov checkov "${CHECKOV_VERSION}" checkov &
pid_checkov=$!
install_tool nca network-config-analyzer "${NCA_VERSION}" nca &
pid_nca=$!
install_tool kubernetes-validate kubernetes-validate "${KVALIDATE_VERSION}" kubernetes-validate \
    "jmespath==${JMESPATH_VERSION}" &
pid_kv=$!

status=0
wait "${pid_checkov}" || status=1
wait "${pid_nca}" || status=1
wait "${pid_kv}" || status=1
if [[ "${status}" -ne 0 ]]; then
    echo "setup-tools: one or more tool installs failed" >&2
    exit 1
fi
echo "setup-tools: done (${TOOLS})"
