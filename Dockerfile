# The standalone dashboard under waitress (a production WSGI server), as a
# non-root user. It asks for sign-in: give it a database and a users file
# (pgbus-web users add NAME --role viewer|operator --users-file users), and
# the module exposing your workflows' REGISTRY (the worker's --definitions)
# in PGBUS_WEB_DEFINITIONS: without it resume, skip and rerun are not
# offered and a group paused on an error offers only "Cancel all". That
# module must be importable: install your package in an image FROM this one
# (USER root, RUN pip install ..., USER pgbus).
#   docker build -t pgbus-web .
#   docker run -e PGBUS_DATABASE_URL=postgresql://user:pass@db:5432/app \
#     -e PGBUS_WEB_USERS_FILE=/run/secrets/users -v "$PWD/users:/run/secrets/users:ro" \
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

WORKDIR /app
COPY pyproject.toml hatch_build.py README.md LICENSE ./
COPY pgbus_web ./pgbus_web
COPY translations ./translations
RUN pip install '.[standalone]' \
 && useradd --system --uid 10001 --no-create-home pgbus

USER pgbus
EXPOSE 8080
# serve is PID 1 and handles SIGTERM itself (docker stop): in-flight
# requests get a few seconds, then it exits 0.
STOPSIGNAL SIGTERM
# /health is 503 while the database is away or lacks the schema.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s \
  CMD python -c "import os, sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:%s/health' % os.environ.get('PGBUS_WEB_PORT', '8080'), timeout=4).status != 200)"
CMD ["pgbus-web", "serve"]
