# The standalone dashboard under waitress (a production WSGI server), as a
# non-root user (uid 10001). It asks for sign-in: give it a database and a
# users file, and the module exposing your workflows' REGISTRY (the
# worker's --definitions) in PGBUS_WEB_DEFINITIONS: without it resume, skip
# and rerun are not offered and a group paused on an error offers only
# "Cancel all". That module must be importable: install your package in an
# image FROM this one (USER root, RUN pip install ..., USER 10001).
#
# The users file must be readable by uid 10001: `pgbus-web users add` writes
# it mode 0600, owned by whoever ran it, so one written by your own user is
# "not readable" in the container. Mount its directory, not the file: the
# file is replaced on each change (written beside it, then renamed), and a
# mount of the file alone keeps showing the old one. Either write it with
# the image itself, as uid 10001:
#   docker build -t pgbus-web .
#   mkdir users && sudo chown 10001 users
#   docker run --rm -it -v "$PWD/users:/users" pgbus-web \
#     pgbus-web users add alice --role operator --users-file /users/users
# or write it on the host and give it to uid 10001 after each change
# (`sudo chown 10001 users/users`), or run the container as its owner
# (`docker run --user "$(id -u)" ...`). Then:
#   docker run -e PGBUS_DATABASE_URL=postgresql://user:pass@db:5432/app \
#     -e PGBUS_WEB_USERS_FILE=/run/pgbus/users -v "$PWD/users:/run/pgbus:ro" \
#     -e PGBUS_WEB_SECRET_KEY=... -e PGBUS_WEB_DEFINITIONS=myapp.workflows \
#     -p 8080:8080 your-image-from-pgbus-web
# Without a users file (or PGBUS_WEB_TRUSTED_HEADER and PGBUS_WEB_TRUSTED_PROXY)
# it refuses to start, unless PGBUS_WEB_NO_AUTH=1. PGBUS_WEB_INSTALL_SCHEMA=1
# installs the schema at start; without it a database without the schema is
# a one-line error. docs/standalone.md.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PGBUS_WEB_HOST=0.0.0.0 \
    PGBUS_WEB_PORT=8080

RUN useradd --system --uid 10001 --no-create-home pgbus

WORKDIR /app
# The dependencies in a layer of their own, from pyproject.toml alone: a
# change to the code reuses it. They are the project's, the standalone
# extra's, and what the build needs (the package is then built without
# build isolation, so that the build fetches nothing either).
COPY pyproject.toml ./
RUN python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb')); \
print('\n'.join(p['build-system']['requires'] + p['project']['dependencies'] \
+ p['project']['optional-dependencies']['standalone']))" > /tmp/requirements.txt \
 && pip install --requirement /tmp/requirements.txt \
 && rm /tmp/requirements.txt

COPY hatch_build.py README.md LICENSE ./
COPY translations ./translations
COPY pgbus_web ./pgbus_web
RUN pip install --no-deps --no-build-isolation . \
 && pip check

USER 10001
EXPOSE 8080
# serve is PID 1 and handles SIGTERM itself (docker stop): in-flight
# requests get a few seconds, then it exits 0.
STOPSIGNAL SIGTERM
# /health is 503 while the database is away or lacks the schema.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s \
  CMD ["python", "-c", "import os, sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:%s/health' % os.environ.get('PGBUS_WEB_PORT', '8080'), timeout=4).status != 200)"]
CMD ["pgbus-web", "serve"]
