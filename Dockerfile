# syntax=docker/dockerfile:1
# The operator's image: `arbiter` on distroless, as deploy/operator.yaml
# runs it (ENTRYPOINT /arbiter, args `run ...`), as the nonroot user
# (65532). Build from the repository root:
#
#   docker build -t REGISTRY/arbiter:TAG .
#
# Builder and runtime are on the same Debian release (bookworm = debian12),
# so the binary finds the glibc it was linked against.
FROM rust:1.95-bookworm AS builder
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin arbiter \
    && cp target/release/arbiter /arbiter

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=builder /arbiter /arbiter
USER 65532:65532
# 8080: /metrics, /healthz, /readyz; 9443: the admission webhooks.
EXPOSE 8080 9443
ENTRYPOINT ["/arbiter"]
