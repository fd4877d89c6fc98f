// Module image builds flagplane's manager image without a container engine,
// with go-containerregistry's Go API (`make image`). A module of its own so
// that its dependencies never touch the operator's go.mod.
module github.com/flagplane/flagplane/hack/image

go 1.26.0

require github.com/google/go-containerregistry v0.22.1

require (
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	golang.org/x/sync v0.22.0 // indirect
)
