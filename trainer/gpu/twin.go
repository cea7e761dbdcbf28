package gpu

import "github.com/pipefeed/pipe/prefetch"

// ErrNoCUDA is what the build without the cuda and cudaemu tags answers
// (replica_off.go): prefetch's, so that one errors.Is covers both.
var ErrNoCUDA = prefetch.ErrNoCUDA

// Both twins, replica.go (the cuda and cudaemu builds) and replica_off.go,
// define Compiled: a build whose twin lacks it fails here.
const _ = Compiled
