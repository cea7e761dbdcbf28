package jpegturbo

import "errors"

// ErrNoJPEGTurbo is what the build without the jpegturbo tag answers every
// call with.
var ErrNoJPEGTurbo = errors.New("libjpeg-turbo is not in this build (go build -tags jpegturbo)")

// Both twins, jpegturbo.go (the jpegturbo build) and jpegturbo_off.go,
// define Compiled: a build whose twin lacks it fails here.
const _ = Compiled
