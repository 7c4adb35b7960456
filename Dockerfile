# RouteLens as an image: the wheel is built in a first stage (gcc compiles the C extensions there), the
# second installs it and holds no compiler and no source tree, so nothing in the working folder can
# shadow the installed packages. It runs as an unprivileged user (uid 10001).
#
#   docker build -t routelens .                                    # the es extra; add probes for the
#   docker build -t routelens --build-arg EXTRAS=es,probes .       # semantic probe and intents (torch: large)
#   docker run -p 8080:8080 -v "$PWD/my-routelens.yaml:/srv/routelens.yaml:ro" \
#     -e ROUTELENS_API_KEYS=... -e ROUTELENS_READ_TOKEN=... -e ROUTELENS_INTAKE_TOKEN=... routelens
#
# The image serves on 0.0.0.0, and off loopback RouteLens refuses to start open: the config must name the
# variables holding the keys (gateway.api_keys_env, storage.read_token_env, storage.intake_token_env), and
# its fleet URLs must reach your instances from inside the container. The repository's routelens.yaml is
# the loopback demo's (a simulated fleet on 127.0.0.1, no keys) and does not start here: begin from
# deploy/routelens.compose.yaml, which names ROUTELENS_API_KEYS, ROUTELENS_READ_TOKEN and ROUTELENS_INTAKE_TOKEN.
# Paths in routelens.yaml are relative to it: mount the files it names (policies, intents routes) beside
# it under /srv. The data (trace file, spool) goes to /srv/.routelens, a volume owned by uid 10001.
# docker-compose.yml's services run this image with deploy/routelens.compose.yaml (copied into /srv/deploy).

FROM python:3.11.13-slim-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY schemas/ schemas/
COPY router_core/ router_core/
COPY ingest/ ingest/
COPY probes/ probes/
COPY app/ app/
COPY sim/ sim/
COPY bench/ bench/
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11.13-slim-bookworm
ARG EXTRAS=es
# With the probes extra, torch's CPU build from PyTorch's index first: PyPI's Linux wheel is the CUDA build.
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=build /wheels/ /tmp/wheels/
# The versions the test suite last passed with (constraints.txt, written by .ci/lock.py).
COPY constraints.txt /tmp/constraints.txt
RUN case ",${EXTRAS}," in *,probes,*) pip install -c /tmp/constraints.txt --index-url "${TORCH_INDEX}" torch==2.13.0;; esac \
    && pip install -c /tmp/constraints.txt "$(ls /tmp/wheels/routelens-*.whl)[${EXTRAS}]" \
    && rm -rf /tmp/wheels /tmp/constraints.txt \
    && groupadd --system --gid 10001 routelens \
    && useradd --system --uid 10001 --gid 10001 --create-home --shell /usr/sbin/nologin routelens
WORKDIR /srv
COPY deploy/ deploy/
# A named volume mounted here starts as a copy of this folder, owner included.
RUN mkdir .routelens && chown 10001:10001 .routelens
USER 10001:10001
# the gateway (gateway.port) and the app (app.port), as deploy/routelens.compose.yaml sets them
EXPOSE 8080 8501
CMD ["routelens", "serve", "--host", "0.0.0.0"]
