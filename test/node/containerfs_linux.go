package node

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// openInRoot opens path relative to the root of process pid, resolving it
// as if that root were "/" (openat2 with RESOLVE_IN_ROOT).
func openInRoot(pid int, path string, flags int) (*os.File, error) {
	root, err := os.Open("/proc/" + strconv.Itoa(pid) + "/root")
	if err != nil {
		return nil, fmt.Errorf("opening the root of process %d: %w", pid, err)
	}
	defer root.Close()
	fd, err := unix.Openat2(int(root.Fd()), strings.TrimPrefix(path, "/"), &unix.OpenHow{
		Flags: uint64(flags | unix.O_CLOEXEC), Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

func readInRoot(pid int, path string) ([]byte, error) {
	f, err := openInRoot(pid, path, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

func statInRoot(pid int, path string) (fs.FileInfo, error) {
	f, err := openInRoot(pid, path, unix.O_PATH)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Stat()
}

func readlinkInRoot(pid int, dir, name string) (string, error) {
	d, err := openInRoot(pid, dir, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return "", err
	}
	defer d.Close()
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(int(d.Fd()), name, buf)
	if err != nil {
		return "", &fs.PathError{Op: "readlink", Path: dir + "/" + name, Err: err}
	}
	return string(buf[:n]), nil
}
