# goodput's container image: `docker build -t goodput .` (see README, "Beyond one machine").
# Stage 1 builds the release binary; stage 2 is a slim Debian runtime (it keeps /bin/sh, which
# the Kubernetes manifests of `goodput k8s` use to print results between marker lines).

FROM rust:1.95-slim-bookworm AS builder
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p goodput \
    && cp target/release/goodput /usr/local/bin/goodput

FROM debian:bookworm-slim AS runtime
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --uid 10001 --create-home --shell /usr/sbin/nologin goodput
COPY --from=builder /usr/local/bin/goodput /usr/local/bin/goodput
USER 10001
WORKDIR /home/goodput
ENTRYPOINT ["goodput"]
CMD ["--help"]
