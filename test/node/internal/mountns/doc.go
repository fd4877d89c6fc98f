// Package mountns runs a program in a mount namespace of its own, with
// directories bind-mounted at the paths a container expects them, the way a
// container runtime would (without any other isolation).
//
// It uses the re-exec pattern: the agent runs its own executable
// (/proc/self/exe) with CLONE_NEWNS and a spec in an environment variable.
// This package's init function recognises that variable before main runs,
// sets up the mounts in the new namespace, drops to the container's user and
// execs the real binary, so that the binary's pid, stdout and exit status are
// the container's. Any binary that imports this package (a test binary that
// imports test/node, the demo) can therefore serve as the helper; nothing
// needs building.
//
// Missing mount points are never created on the host. When a mount path's
// parent does not exist, its deepest existing ancestor is "shadowed" in the
// namespace: a tmpfs is mounted over it and each of its original entries is
// bind-mounted back (symlinks recreated), after which the missing directories
// are created on the tmpfs. Only that namespace sees the difference. A
// missing directory right under / cannot be created this way and is an
// error.
//
// Start errors (a mount that failed, a binary that cannot run) reach the
// caller through a close-on-exec pipe, as in runc: an exec that succeeds
// closes it without a word.
package mountns
