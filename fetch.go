package pipe

import "github.com/pipefeed/pipe/source/remote"

// FetchStats counts what sources fetched from object stores and HTTP
// servers, and how often the shard cache had a shard already.
type FetchStats = remote.Stats

// Fetched returns the process's fetch figures so far: sources fetch their
// URL shards as they open, so after Load they cover the first epoch's
// data.
func Fetched() FetchStats { return remote.Totals() }
