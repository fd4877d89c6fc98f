package mountns_test

// Ginkgo's flags: `make test-integration` passes -ginkgo.v to every package
// under test/, and a test binary refuses a flag it does not define. These
// tests are plain table tests; importing Ginkgo only registers its flags.
import _ "github.com/onsi/ginkgo/v2"
