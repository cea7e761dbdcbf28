//go:build !unix

package sharding

import "io/fs"

func allocated(info fs.FileInfo) int64 { return info.Size() }
