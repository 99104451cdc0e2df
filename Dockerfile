# idemgate container image: a static binary on distroless, run as non-root.
#   docker build -t idemgate --build-arg VERSION=$(git describe --tags --always) .
# CI does not run a container engine: it lints this file (deploy_test.go) and
# builds the same static binary with the same flags (scripts/package).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" \
    -o /out/idemgate ./cmd/idemgate

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/idemgate /usr/bin/idemgate
COPY configs/idemgate.example.yaml /etc/idemgate/idemgate.yaml
ENV IDEMGATE_DATA_DIR=/var/lib/idemgate
USER nonroot:nonroot
# 8081: admin (/healthz, /readyz, /metrics); 8080: ingest when enabled.
EXPOSE 8081 8080
ENTRYPOINT ["/usr/bin/idemgate"]
CMD ["run", "--config", "/etc/idemgate/idemgate.yaml"]
