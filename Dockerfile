# syntax=docker/dockerfile:1
# latch: build with the Rust toolchain, run from a small distroless image as a non-root user.

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src src
COPY migrations migrations
COPY templates templates
RUN cargo build --release --locked --bin latch \
 && mkdir -p /out/data \
 && cp target/release/latch /out/latch

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/latch /usr/local/bin/latch
COPY --from=build --chown=65532:65532 /out/data /var/lib/latch/data
WORKDIR /var/lib/latch
ENV LATCH_LISTEN=0.0.0.0:8080 \
    LATCH_DATA_DIR=/var/lib/latch/data \
    LATCH_DATABASE_URL=sqlite:///var/lib/latch/data/latch.db
USER 65532:65532
EXPOSE 8080
VOLUME ["/var/lib/latch/data"]
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 CMD ["latch", "healthcheck"]
ENTRYPOINT ["latch"]
CMD ["serve"]
