FROM python:3.11-slim
# Static files are collected into the image (hashed, compressed) and served by the web process (WhiteNoise).
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 DJANGO_STATIC_ROOT=/app/static
RUN apt-get update && apt-get install -y --no-install-recommends git && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md ./
COPY aiteam aiteam
COPY agents agents
COPY lifecycle lifecycle
COPY templates templates
COPY manage.py ./
RUN pip install --no-cache-dir . && python manage.py collectstatic --noinput -v0 && useradd --create-home aiteam \
    && mkdir -p /var/lib/aiteam && chown aiteam /var/lib/aiteam
USER aiteam
EXPOSE 8000
CMD ["gunicorn", "aiteam.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3"]
