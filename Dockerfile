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
# Every runtime dependency at the exact version and hash of
# requirements/runtime.lock (`make lock` writes it from pyproject.toml's
# `runtime` extra), with the setuptools that builds the project; all install
# from wheels, so the image needs no compiler. A layer of its own: a change to
# the code does not reinstall them.
COPY requirements/runtime.lock ./requirements/
RUN pip install --no-cache-dir --require-hashes -r requirements/runtime.lock
COPY pyproject.toml README.md ./
COPY contracts ./contracts
COPY projections ./projections
COPY adapters ./adapters
COPY streams ./streams
# The project itself, with its `runtime` extra checked against what the lock
# installed: --no-index lets nothing else in (a dependency missing from the lock
# fails the build), and the build uses the locked setuptools. (DL3013 asks for
# `pkg==version`; this installs the local project, whose versions are locked.)
# hadolint ignore=DL3013
RUN pip install --no-cache-dir --no-index --no-build-isolation ".[runtime]" \
    && rm -rf build ./*.egg-info

USER 10001:10001

# /livez, /readyz and /metrics (REDSTRING_HTTP_PORT).
EXPOSE 6066
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/livez' % os.environ.get('REDSTRING_HTTP_PORT', '6066'), timeout=4)"]

ENTRYPOINT ["redstring"]
CMD ["worker"]
