// Package image tests the manager's image as `make image` builds it, without
// a container engine: built twice, it has the same digest; read as the OCI
// image layout it is (index, manifest, config, layer, every blob checked
// against its digest), it runs the static binary of its one layer as
// 65532:65532 with the OCI labels and the version; and that binary, taken
// out of the layer, runs (--version, --help).
package image
