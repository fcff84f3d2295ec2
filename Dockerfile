# codemode in a container. Binding 0.0.0.0 requires API keys, so mount a config file with
# [[api_keys]] at /etc/codemode/config.toml (see docs/reference/settings.md).
# 3.12: a guest request's handler starts eagerly there (docs/architecture.md); 3.11 is the least supported.
# The wheel is built in a stage with a C compiler (the prelude's plain-data check and the JSON syntax scan are C
# extensions);
# the image that runs it has none.
FROM python:3.12-slim AS build
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md ./
COPY bridge ./bridge
COPY guest_runtime ./guest_runtime
COPY service ./service
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.12-slim
COPY --from=build /wheels /wheels
# A fixed uid: deploy/kubernetes runs the pod as 10001 (runAsNonRoot needs a number to check).
RUN pip install --no-cache-dir /wheels/*.whl && rm -r /wheels \
  && useradd --system --uid 10001 --home /var/lib/codemode --create-home codemode
USER 10001
ENV CODEMODE_DATA_DIR=/var/lib/codemode
EXPOSE 8000
CMD ["codemode", "serve", "--host", "0.0.0.0", "--port", "8000", "--config", "/etc/codemode/config.toml"]
