//go:build !linux

package node

import (
	"errors"
	"io/fs"
)

var errNoContainerFS = errors.New("reading a container's files needs Linux")

func readInRoot(int, string) ([]byte, error)             { return nil, errNoContainerFS }
func statInRoot(int, string) (fs.FileInfo, error)        { return nil, errNoContainerFS }
func readlinkInRoot(int, string, string) (string, error) { return "", errNoContainerFS }
