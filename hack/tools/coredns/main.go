// Command coredns is CoreDNS v1.15.0 with the plugins of a cluster's DNS:
// the Service and Pod records of the kubernetes plugin, and the bind,
// health, readiness, error and cache plugins around it. Nothing else is linked in.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

// The order in which the plugins handle a query, as in CoreDNS' plugin.cfg.
var directives = []string{"bind", "ready", "health", "errors", "log", "cache", "kubernetes"}

func main() {
	dnsserver.Directives = directives
	coremain.Run()
}
