//go:build !amd64 || purego

package jpegdec

// baselineMCU is baselineMCUGo where there is no assembly version.
func (b *bitReader) baselineMCU(blocks *[10][64]int16, nb int, comps *[10]*component, dcs, acs *[10]*huffTable) {
	b.baselineMCUGo(blocks, nb, comps, dcs, acs)
}

// baselineMCUVersions are the versions of baselineMCU this build has, by
// name, for the tests to check against baselineMCUGo.
func baselineMCUVersions() map[string]mcuFunc {
	return map[string]mcuFunc{
		"go": (*bitReader).baselineMCUGo,
	}
}
