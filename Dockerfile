# Multi-stage build of the operator image: a static-ish release binary on a distroless,
# non-root runtime image (no shell, no package manager).
FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY benches ./benches
COPY crates ./crates
COPY scripts/build-release.sh scripts/link-hot-first.sh ./scripts/
COPY build ./build
# Without the default `dev` feature: no embedded control plane (`dev`, `bench`) in the image; the
# code a burst runs laid out together (see the script).
RUN scripts/build-release.sh

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/workflow-operator /usr/local/bin/workflow-operator
# The step agent, copied from this image into the pods of steps that need it (`--agent-image`).
COPY --from=build /src/target/release/workflow-agent /usr/local/bin/workflow-agent
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/workflow-operator"]
CMD ["run"]
