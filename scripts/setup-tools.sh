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

# install_tool <venv-name> <dist-name> <version> <binary>
install_tool() {
    local name="$1" dist="$2" version="$3" binary="$4"
    local venv="${TOOLS}/${name}"
    local installed=""
    if [[ -x "${venv}/bin/python" ]]; then
        # Captured first: `pip show | grep -q` under pipefail fails on SIGPIPE.
        installed="$("${venv}/bin/python" -m pip show "${dist}" 2>/dev/null || true)"
    fi
    if [[ -x "${venv}/bin/${binary}" ]] && grep -qx "Version: ${version}" <<<"${installed}"; then
        echo "setup-tools: ${dist}==${version} already in ${venv}"
        return 0
    fi
    echo "setup-tools: installing ${dist}==${version} into ${venv}"
    "${PYTHON}" -m venv "${venv}"
    "${venv}/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
    "${venv}/bin/python" -m pip install -q --disable-pip-version-check "${dist}==${version}"
    test -x "${venv}/bin/${binary}"
}

mkdir -p "${TOOLS}"
install_tool checkov checkov "${CHECKOV_VERSION}" checkov &
pid_checkov=$!
install_tool nca network-config-analyzer "${NCA_VERSION}" nca &
pid_nca=$!
install_tool kubernetes-validate kubernetes-validate "${KVALIDATE_VERSION}" kubernetes-validate &
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
