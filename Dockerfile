# The placer REST service.
#   docker build -t placer .
#   docker run -p 8000:8000 -v placer-data:/data -e PLACER_API_KEYS=key-a,key-b -e PLACER_ADMIN_KEY=admin placer
# The container listens on 0.0.0.0, so it needs keys: without PLACER_API_KEYS (or PLACER_ADMIN_KEY) it refuses
# to start. To serve without keys anyway (anyone who can reach the port can use it), add -e PLACER_INSECURE=1.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    TF_CPP_MIN_LOG_LEVEL=3 \
    NUMBA_CACHE_DIR=/tmp/numba-cache \
    PLACER_DATA_DIR=/data \
    PLACER_BUNDLED_GRAPHS_DIR=/app/graphs

RUN useradd --create-home --uid 10001 placer \
    && mkdir /data && chown placer:placer /data

WORKDIR /app
COPY pyproject.toml README.md ./
COPY placer ./placer
COPY service ./service
RUN pip install .
COPY graphs/*.json.gz ./graphs/

USER placer
VOLUME ["/data"]
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"
CMD ["placer", "serve", "--host", "0.0.0.0", "--port", "8000"]
