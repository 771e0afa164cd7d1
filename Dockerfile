# The standalone dashboard under waitress (a production WSGI server), as a
# non-root user. Give it a database:
#   docker build -t pgbus-web .
#   docker run -e PGBUS_DATABASE_URL=postgresql://user:pass@db:5432/app -p 8080:8080 pgbus-web
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY pgbus_web ./pgbus_web
COPY translations ./translations
RUN pip install . \
 && useradd --system --uid 10001 --no-create-home pgbus

USER pgbus
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s \
  CMD python -c "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8080/health').status != 200)"
CMD ["pgbus-web", "serve", "--host", "0.0.0.0", "--port", "8080"]
