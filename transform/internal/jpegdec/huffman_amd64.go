//go:build amd64 && !purego

package jpegdec

import "golang.org/x/sys/cpu"

// haveBMI2 picks baselineMCU's body with BMI2's SHLX and SHRX, whose
// shift counts need not be in CX and which set no flags, and BMI1's ANDN.
var haveBMI2 = cpu.X86.HasBMI1 && cpu.X86.HasBMI2

// baselineMCU is baselineMCUGo in assembly. It inlines, leaving one call
// an MCU.
func (b *bitReader) baselineMCU(blocks *[10][64]int16, nb int, comps *[10]*component, dcs, acs *[10]*huffTable) {
	baselineMCUAsm(b, blocks, nb, comps, dcs, acs)
}

// baselineMCUVersions are the versions of baselineMCU this machine can
// run, by name, for the tests to check against baselineMCUGo.
func baselineMCUVersions() map[string]mcuFunc {
	m := map[string]mcuFunc{
		"amd64": baselineMCUAMD64,
	}
	if haveBMI2 {
		m["bmi2"] = baselineMCUBMI2
	}
	return m
}

// baselineMCUAsm jumps to baselineMCUBMI2 where haveBMI2, else to
// baselineMCUAMD64.
//
//go:noescape
func baselineMCUAsm(b *bitReader, blocks *[10][64]int16, nb int, comps *[10]*component, dcs, acs *[10]*huffTable)

//go:noescape
func baselineMCUBMI2(b *bitReader, blocks *[10][64]int16, nb int, comps *[10]*component, dcs, acs *[10]*huffTable)

//go:noescape
func baselineMCUAMD64(b *bitReader, blocks *[10][64]int16, nb int, comps *[10]*component, dcs, acs *[10]*huffTable)
