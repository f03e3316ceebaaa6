# The redstring worker image, used by docker-compose.yml and the Helm chart
# (helm/redstring). One image for every command: the entry point is the
# `redstring` CLI and the default command is `worker`, so `topics create`,
# `replay --tenant T --yes` or `publish FILE` run from the same image.
#
#   docker build -t redstring:0.1.0 .
#
# Linted by tests/unit/test_dockerfile.py (hadolint plus the essentials).
FROM python:3.11.14-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# A fixed, unprivileged uid/gid: the chart's securityContext runs as it too.
RUN groupadd --system --gid 10001 redstring \
    && useradd --system --uid 10001 --gid 10001 --home-dir /app --no-create-home \
       --shell /usr/sbin/nologin redstring

WORKDIR /app
COPY pyproject.toml README.md ./
COPY contracts ./contracts
COPY projections ./projections
COPY adapters ./adapters
COPY streams ./streams
# Every runtime dependency is pinned in pyproject.toml's `runtime` extra; all of
# them install from wheels, so the image needs no compiler. (DL3013 asks for
# `pkg==version`; this installs the local project, whose pins are in pyproject.)
# hadolint ignore=DL3013
RUN pip install --no-cache-dir ".[runtime]" \
    && rm -rf build ./*.egg-info

USER 10001:10001

# /livez, /readyz and /metrics (REDSTRING_HTTP_PORT).
EXPOSE 6066
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/livez' % os.environ.get('REDSTRING_HTTP_PORT', '6066'), timeout=4)"]

ENTRYPOINT ["redstring"]
CMD ["worker"]
