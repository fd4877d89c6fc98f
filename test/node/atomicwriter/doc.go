// Package atomicwriter projects a set of files into a directory the way the
// kubelet projects ConfigMap, Secret, downward API and projected volumes, so
// that a program reading them sees what it sees in a pod:
//
//	dir/..2026_01_02_15_04_05.123456789/<path>   the files of one version
//	dir/..data -> ..2026_01_02_15_04_05.123456789
//	dir/<first path element> -> ..data/<first path element>
//
// An update writes a complete new version directory, points a "..data_tmp"
// symlink at it and renames that over "..data": the one atomic step a reader
// can observe. The user-visible entries are symlinks through "..data", so a
// reader that holds a path, or watches one, sees the new content without any
// file it opened changing under it. Then entries that left the payload are
// removed, and the old version directory with them.
//
// The layout is the kubelet's (pkg/volume/util/atomic_writer.go describes
// it); this is an independent implementation of that behaviour.
package atomicwriter
