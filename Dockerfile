# The manager's image: `docker build -t <registry>/flagplane:<tag> .`, then
# point config/default at it (see README, Install). Static binary, no shell,
# non-root.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/manager ./cmd/manager

FROM scratch
COPY --from=build /out/manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
