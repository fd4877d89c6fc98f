// Command etcd runs etcd's server main; the test harness uses it as the
// control plane's store.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
