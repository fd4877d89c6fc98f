package atomicwriter

import (
	"io/fs"
	"syscall"
)

func sameOwner(info fs.FileInfo, f File) bool {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return true
	}
	return (f.UID == nil || int(st.Uid) == *f.UID) && (f.GID == nil || int(st.Gid) == *f.GID)
}
