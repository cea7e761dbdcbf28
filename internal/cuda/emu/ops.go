//go:build linux

package emu

import (
	"fmt"
	"sort"
	"strings"
)

// inst is a decoded instruction. Every operand is a slot of the thread's
// register file (registers, special registers, parameters and constants
// alike), so the interpreter never asks what kind an operand is.
//
// Register values are kept in 64-bit slots; an instruction reads as many
// low bits as its type has and writes its result extended to 64 bits (a
// 32-bit result's high bits are not significant). Predicates are 0 or 1.
type inst struct {
	op      opcode
	cmp     uint8 // setp's comparison; cvt's mode
	predNeg bool  // @!%p
	pred    int32 // guard predicate slot, or -1
	d       int32 // destination
	a, b, c int32 // sources (c: a second destination for unpacking moves)
	imm     int64 // address offset, branch target, conversion codes
}

type opcode uint8

const (
	opExit opcode = iota
	opBra
	opBar
	opMov
	opCvta // cvta.to.global: a move, marked for classifying parameters
	opNotPred
	opPack64 // d = a | b<<32
	opUnpack64
	opPack32 // d = a&0xffff | b<<16
	opUnpack32
	opSelp

	opAdd32
	opSub32
	opMul32
	opMad32
	opMulWideS32
	opMulWideU32
	opDivS32
	opDivU32
	opRemS32
	opRemU32
	opMinS32
	opMaxS32
	opMinU32
	opMaxU32
	opNeg32
	opAbs32
	opShl32
	opShrS32
	opShrU32

	opAdd64
	opSub64
	opMul64
	opMad64
	opDivS64
	opDivU64
	opRemS64
	opRemU64
	opMinS64
	opMaxS64
	opMinU64
	opMaxU64
	opNeg64
	opAbs64
	opShl64
	opShrS64
	opShrU64

	opAnd
	opOr
	opXor
	opNot

	opSetpS16
	opSetpU16
	opSetpS32
	opSetpU32
	opSetpS64
	opSetpU64
	opSetpF32
	opSetpF64

	opAddF32
	opSubF32
	opMulF32
	opDivF32
	opFmaF32
	opNegF32
	opAbsF32
	opMinF32
	opMaxF32
	opSqrtF32
	opRcpF32

	opAddF64
	opSubF64
	opMulF64
	opDivF64
	opFmaF64
	opNegF64
	opAbsF64
	opMinF64
	opMaxF64
	opSqrtF64
	opRcpF64
	opRcpApproxFtzF64

	opExt // d = ext(a): cvt between integer types, ld.param (imm: ext codes)
	opCvtF32F64
	opCvtF64F32
	opCvtF16F32
	opCvtF32F16
	opCvtF32S // d = float32(signed ext(a))
	opCvtF32U
	opCvtF64S
	opCvtF64U
	opCvtIF32 // d = integer(a), rounded by cmp, saturated to imm's type
	opCvtIF64

	opLdG8u
	opLdG8s
	opLdG16u
	opLdG16s
	opLdG32u
	opLdG32s
	opLdG64
	opLdS8u
	opLdS8s
	opLdS16u
	opLdS16s
	opLdS32u
	opLdS32s
	opLdS64
	opStG8
	opStG16
	opStG32
	opStG64
	opStS8
	opStS16
	opStS32
	opStS64
)

// Comparisons of setp.
const (
	cmpEq uint8 = iota
	cmpNe
	cmpLt
	cmpLe
	cmpGt
	cmpGe
	cmpEqu // unordered: true when either operand is NaN
	cmpNeu
	cmpLtu
	cmpLeu
	cmpGtu
	cmpGeu
	cmpNum // neither is NaN
	cmpNan // either is NaN
)

var cmpNames = map[string]uint8{
	"eq": cmpEq, "ne": cmpNe, "lt": cmpLt, "le": cmpLe, "gt": cmpGt, "ge": cmpGe,
	"lo": cmpLt, "ls": cmpLe, "hi": cmpGt, "hs": cmpGe,
	"equ": cmpEqu, "neu": cmpNeu, "ltu": cmpLtu, "leu": cmpLeu, "gtu": cmpGtu, "geu": cmpGeu,
	"num": cmpNum, "nan": cmpNan,
}

// Integer extensions: how a value of a type is widened to 64 bits.
const (
	ext64 = iota // no change
	extS8
	extU8
	extS16
	extU16
	extS32
	extU32
)

func extCode(t string) int64 {
	switch t {
	case "s8":
		return extS8
	case "u8", "b8":
		return extU8
	case "s16":
		return extS16
	case "u16", "b16":
		return extU16
	case "s32":
		return extS32
	case "u32", "b32", "f32":
		return extU32
	}
	return ext64
}

func extend(v uint64, code int64) uint64 {
	switch code {
	case extS8:
		return uint64(int64(int8(v)))
	case extU8:
		return uint64(uint8(v))
	case extS16:
		return uint64(int64(int16(v)))
	case extU16:
		return uint64(uint16(v))
	case extS32:
		return uint64(int64(int32(v)))
	case extU32:
		return uint64(uint32(v))
	}
	return v
}

// decoder decodes the operands of one instruction form.
type decoder func(b *body, in *inst, mn string, ops []string) error

// decoders maps every implemented instruction form (the whole mnemonic,
// with its modifiers) to its decoder. A form missing here is a load error.
var decoders = map[string]decoder{}

// Forms lists the implemented instruction forms, sorted.
func Forms() []string {
	var f []string
	for k := range decoders {
		f = append(f, k)
	}
	sort.Strings(f)
	return f
}

func def(mn string, d decoder) {
	if _, dup := decoders[mn]; dup {
		panic("emu: instruction form defined twice: " + mn)
	}
	decoders[mn] = d
}

// typeOf is the type suffix of a mnemonic (its last modifier).
func typeOf(mn string) string { return mn[strings.LastIndexByte(mn, '.')+1:] }

// nary decodes d, a[, b[, c]] for op, sources of the mnemonic's type.
func nary(op opcode, n int) decoder {
	return func(b *body, in *inst, mn string, ops []string) error {
		if len(ops) != n+1 {
			return fmt.Errorf("want %d operands, have %d", n+1, len(ops))
		}
		t := typeOf(mn)
		var err error
		if in.d, err = b.dst(ops[0]); err != nil {
			return err
		}
		srcs := []*int32{&in.a, &in.b, &in.c}
		for i := range n {
			if *srcs[i], err = b.src(ops[1+i], t); err != nil {
				return err
			}
		}
		in.op = op
		return nil
	}
}

// shift decodes a shift: its amount is a u32.
func shift(op opcode) decoder {
	return func(b *body, in *inst, mn string, ops []string) error {
		if len(ops) != 3 {
			return fmt.Errorf("want 3 operands")
		}
		var err error
		if in.d, err = b.dst(ops[0]); err != nil {
			return err
		}
		if in.a, err = b.src(ops[1], typeOf(mn)); err != nil {
			return err
		}
		if in.b, err = b.src(ops[2], "u32"); err != nil {
			return err
		}
		in.op = op
		return nil
	}
}

func init() {
	// Control.
	for _, mn := range []string{"ret", "exit"} {
		def(mn, func(b *body, in *inst, mn string, ops []string) error {
			if len(ops) != 0 {
				return fmt.Errorf("%s takes no operands", mn)
			}
			in.op = opExit
			return nil
		})
	}
	for _, mn := range []string{"bra", "bra.uni"} {
		def(mn, func(b *body, in *inst, mn string, ops []string) error {
			if len(ops) != 1 || strings.HasPrefix(ops[0], "%") {
				return fmt.Errorf("want one label")
			}
			in.op = opBra
			b.fixups = append(b.fixups, fixup{inst: len(b.insts), label: ops[0], line: b.p.n})
			return nil
		})
	}
	for _, mn := range []string{"bar.sync", "barrier.sync"} {
		def(mn, func(b *body, in *inst, mn string, ops []string) error {
			if len(ops) != 1 || ops[0] != "0" {
				return fmt.Errorf("only a barrier of the whole block (%s 0) is emulated", mn)
			}
			in.op = opBar
			return nil
		})
	}

	// Moves.
	for _, t := range []string{"pred", "b16", "u16", "s16", "b32", "u32", "s32", "f32", "b64", "u64", "s64", "f64"} {
		def("mov."+t, decodeMov)
	}
	for _, t := range []string{"b32", "s32", "u32", "f32", "b64", "s64", "u64", "f64", "b16", "u16", "s16"} {
		def("selp."+t, decodeSelp)
	}
	def("cvta.to.global.u64", nary(opCvta, 1))

	// Integer arithmetic.
	for _, t := range []string{"s32", "u32"} {
		def("add."+t, nary(opAdd32, 2))
		def("sub."+t, nary(opSub32, 2))
		def("mul.lo."+t, nary(opMul32, 2))
		def("mad.lo."+t, nary(opMad32, 3))
	}
	for _, t := range []string{"s64", "u64"} {
		def("add."+t, nary(opAdd64, 2))
		def("sub."+t, nary(opSub64, 2))
		def("mul.lo."+t, nary(opMul64, 2))
		def("mad.lo."+t, nary(opMad64, 3))
	}
	def("mul.wide.s32", nary(opMulWideS32, 2))
	def("mul.wide.u32", nary(opMulWideU32, 2))
	for _, f := range []struct {
		t                                 string
		div, rem, min, max, neg, abs, shr opcode
	}{
		{"s32", opDivS32, opRemS32, opMinS32, opMaxS32, opNeg32, opAbs32, opShrS32},
		{"u32", opDivU32, opRemU32, opMinU32, opMaxU32, 0, 0, opShrU32},
		{"s64", opDivS64, opRemS64, opMinS64, opMaxS64, opNeg64, opAbs64, opShrS64},
		{"u64", opDivU64, opRemU64, opMinU64, opMaxU64, 0, 0, opShrU64},
	} {
		def("div."+f.t, nary(f.div, 2))
		def("rem."+f.t, nary(f.rem, 2))
		def("min."+f.t, nary(f.min, 2))
		def("max."+f.t, nary(f.max, 2))
		def("shr."+f.t, shift(f.shr))
		if f.neg != 0 {
			def("neg."+f.t, nary(f.neg, 1))
			def("abs."+f.t, nary(f.abs, 1))
		}
	}
	def("shr.b32", shift(opShrU32))
	def("shr.b64", shift(opShrU64))
	def("shl.b32", shift(opShl32))
	def("shl.b64", shift(opShl64))
	for _, t := range []string{"b16", "b32", "b64", "pred"} {
		def("and."+t, nary(opAnd, 2))
		def("or."+t, nary(opOr, 2))
		def("xor."+t, nary(opXor, 2))
	}
	for _, t := range []string{"b16", "b32", "b64"} {
		def("not."+t, nary(opNot, 1))
	}
	def("not.pred", nary(opNotPred, 1))

	// Comparisons.
	for _, t := range []string{"b16", "s16", "u16", "b32", "s32", "u32", "b64", "s64", "u64", "f32", "f64"} {
		var op opcode
		switch t {
		case "s16":
			op = opSetpS16
		case "u16", "b16":
			op = opSetpU16
		case "s32":
			op = opSetpS32
		case "u32", "b32":
			op = opSetpU32
		case "s64":
			op = opSetpS64
		case "u64", "b64":
			op = opSetpU64
		case "f32":
			op = opSetpF32
		case "f64":
			op = opSetpF64
		}
		for name, c := range cmpNames {
			float, unsigned := t[0] == 'f', t[0] == 'u'
			switch {
			case c >= cmpEqu && !float:
				continue
			case (name == "lo" || name == "ls" || name == "hi" || name == "hs") && !unsigned:
				continue
			case t[0] == 'b' && c != cmpEq && c != cmpNe:
				continue
			}
			def("setp."+name+"."+t, decodeSetp(op, c))
		}
	}

	// Floating point: every operation rounds to nearest even, as .rn says.
	for _, f := range []struct {
		t                                           string
		add, sub, mul, div, fma, neg, abs, min, max opcode
		sqrt, rcp                                   opcode
	}{
		{"f32", opAddF32, opSubF32, opMulF32, opDivF32, opFmaF32, opNegF32, opAbsF32, opMinF32, opMaxF32, opSqrtF32, opRcpF32},
		{"f64", opAddF64, opSubF64, opMulF64, opDivF64, opFmaF64, opNegF64, opAbsF64, opMinF64, opMaxF64, opSqrtF64, opRcpF64},
	} {
		def("add.rn."+f.t, nary(f.add, 2))
		def("sub.rn."+f.t, nary(f.sub, 2))
		def("mul.rn."+f.t, nary(f.mul, 2))
		def("div.rn."+f.t, nary(f.div, 2))
		def("fma.rn."+f.t, nary(f.fma, 3))
		def("neg."+f.t, nary(f.neg, 1))
		def("abs."+f.t, nary(f.abs, 1))
		def("min."+f.t, nary(f.min, 2))
		def("max."+f.t, nary(f.max, 2))
		def("sqrt.rn."+f.t, nary(f.sqrt, 1))
		def("rcp.rn."+f.t, nary(f.rcp, 1))
	}
	def("rcp.approx.ftz.f64", nary(opRcpApproxFtzF64, 1))

	// Conversions.
	ints := []string{"u8", "s8", "u16", "s16", "u32", "s32", "u64", "s64"}
	for _, d := range ints {
		for _, s := range ints {
			def("cvt."+d+"."+s, decodeCvtInt)
		}
		def("cvt.rn.f32."+d, decodeCvt)
		def("cvt.rn.f64."+d, decodeCvt)
		for _, r := range []string{"rzi", "rni", "rmi", "rpi"} {
			def("cvt."+r+"."+d+".f32", decodeCvt)
			def("cvt."+r+"."+d+".f64", decodeCvt)
		}
	}
	def("cvt.rn.f32.f64", decodeCvt)
	def("cvt.rn.f16.f32", decodeCvt)
	def("cvt.f32.f16", decodeCvt)
	def("cvt.f64.f32", decodeCvt)

	// Memory.
	for _, t := range []string{"u8", "s8", "b8", "u16", "s16", "b16", "u32", "s32", "b32", "f32", "u64", "s64", "b64", "f64"} {
		for _, ss := range []string{"global", "shared", "param"} {
			def("ld."+ss+"."+t, decodeLd)
		}
		def("ld.global.nc."+t, decodeLd)
		def("st.global."+t, decodeSt)
		def("st.shared."+t, decodeSt)
	}
}

func decodeMov(b *body, in *inst, mn string, ops []string) error {
	if len(ops) != 2 {
		return fmt.Errorf("want 2 operands")
	}
	t := typeOf(mn)
	vecDst, vecSrc := strings.HasPrefix(ops[0], "{"), strings.HasPrefix(ops[1], "{")
	var err error
	switch {
	case vecDst && vecSrc:
		return fmt.Errorf("vector to vector move")
	case vecDst || vecSrc:
		half := map[string]string{"b64": "b32", "b32": "b16"}[t]
		if half == "" {
			return fmt.Errorf("vector move of %s", t)
		}
		v := ops[0]
		if vecSrc {
			v = ops[1]
		}
		parts, err := splitOperands(strings.TrimSpace(v[1 : len(v)-1]))
		if err != nil || len(parts) != 2 {
			return fmt.Errorf("want a vector of two %s", half)
		}
		if vecDst {
			// {lo, hi} = a
			if in.d, err = b.dst(parts[0]); err != nil {
				return err
			}
			if in.c, err = b.dst(parts[1]); err != nil {
				return err
			}
			if in.a, err = b.src(ops[1], t); err != nil {
				return err
			}
			in.op = map[string]opcode{"b64": opUnpack64, "b32": opUnpack32}[t]
			return nil
		}
		if in.d, err = b.dst(ops[0]); err != nil {
			return err
		}
		if in.a, err = b.src(parts[0], half); err != nil {
			return err
		}
		if in.b, err = b.src(parts[1], half); err != nil {
			return err
		}
		in.op = map[string]opcode{"b64": opPack64, "b32": opPack32}[t]
		return nil
	}
	if in.d, err = b.dst(ops[0]); err != nil {
		return err
	}
	if in.a, err = b.src(ops[1], t); err != nil {
		return err
	}
	in.op = opMov
	return nil
}

func decodeSelp(b *body, in *inst, mn string, ops []string) error {
	if len(ops) != 4 {
		return fmt.Errorf("want 4 operands")
	}
	t := typeOf(mn)
	var err error
	if in.d, err = b.dst(ops[0]); err != nil {
		return err
	}
	if in.a, err = b.src(ops[1], t); err != nil {
		return err
	}
	if in.b, err = b.src(ops[2], t); err != nil {
		return err
	}
	if in.c, err = b.src(ops[3], "pred"); err != nil {
		return err
	}
	in.op = opSelp
	return nil
}

func decodeSetp(op opcode, c uint8) decoder {
	return func(b *body, in *inst, mn string, ops []string) error {
		if len(ops) != 3 {
			return fmt.Errorf("want 3 operands (setp with a second destination or a combining predicate is not emulated)")
		}
		t := typeOf(mn)
		var err error
		if in.d, err = b.dst(ops[0]); err != nil {
			return err
		}
		if in.a, err = b.src(ops[1], t); err != nil {
			return err
		}
		if in.b, err = b.src(ops[2], t); err != nil {
			return err
		}
		in.op, in.cmp = op, c
		return nil
	}
}

func decodeCvtInt(b *body, in *inst, mn string, ops []string) error {
	f := strings.Split(mn, ".") // cvt dst src
	if err := nary(opExt, 1)(b, in, mn, ops); err != nil {
		return err
	}
	// Widen from the source type, then to the destination type.
	in.imm = extCode(f[2]) | extCode(f[1])<<8
	return nil
}

// Float-to-integer rounding modes (inst.cmp of opCvtIF32/64).
const (
	roundZero uint8 = iota
	roundNearest
	roundDown
	roundUp
)

func decodeCvt(b *body, in *inst, mn string, ops []string) error {
	f := strings.Split(mn, ".")
	if len(ops) != 2 {
		return fmt.Errorf("want 2 operands")
	}
	var err error
	if in.d, err = b.dst(ops[0]); err != nil {
		return err
	}
	src := f[len(f)-1]
	if in.a, err = b.src(ops[1], src); err != nil {
		return err
	}
	dst := f[len(f)-2]
	switch {
	case dst == "f32" && src == "f64":
		in.op = opCvtF32F64
	case dst == "f64" && src == "f32":
		in.op = opCvtF64F32
	case dst == "f16" && src == "f32":
		in.op = opCvtF16F32
	case dst == "f32" && src == "f16":
		in.op = opCvtF32F16
	case dst == "f32" || dst == "f64":
		signed := src[0] == 's'
		in.imm = extCode(src)
		switch {
		case dst == "f32" && signed:
			in.op = opCvtF32S
		case dst == "f32":
			in.op = opCvtF32U
		case signed:
			in.op = opCvtF64S
		default:
			in.op = opCvtF64U
		}
	default:
		in.op = opCvtIF32
		if src == "f64" {
			in.op = opCvtIF64
		}
		in.cmp = map[string]uint8{"rzi": roundZero, "rni": roundNearest, "rmi": roundDown, "rpi": roundUp}[f[1]]
		in.imm = intTypeCode(dst)
	}
	return nil
}

// intTypeCode names an integer type for saturating conversions: its width
// in bits, negative for signed types.
func intTypeCode(t string) int64 {
	n := int64(typeBits(t))
	if t[0] == 's' {
		return -n
	}
	return n
}

var loadOps = map[string][2]opcode{ // type → {global, shared}
	"u8": {opLdG8u, opLdS8u}, "b8": {opLdG8u, opLdS8u}, "s8": {opLdG8s, opLdS8s},
	"u16": {opLdG16u, opLdS16u}, "b16": {opLdG16u, opLdS16u}, "s16": {opLdG16s, opLdS16s},
	"u32": {opLdG32u, opLdS32u}, "b32": {opLdG32u, opLdS32u}, "f32": {opLdG32u, opLdS32u}, "s32": {opLdG32s, opLdS32s},
	"u64": {opLdG64, opLdS64}, "b64": {opLdG64, opLdS64}, "s64": {opLdG64, opLdS64}, "f64": {opLdG64, opLdS64},
}

func decodeLd(b *body, in *inst, mn string, ops []string) error {
	if len(ops) != 2 {
		return fmt.Errorf("want 2 operands")
	}
	f := strings.Split(mn, ".")
	ss, t := f[1], typeOf(mn)
	var err error
	if in.d, err = b.dst(ops[0]); err != nil {
		return err
	}
	if in.a, in.imm, err = b.addr(ops[1], ss); err != nil {
		return err
	}
	switch ss {
	case "param":
		in.op = opExt
		in.imm = extCode(t)
		b.paramLoads[in.d] = int(paramRef - in.a)
	case "global":
		in.op = loadOps[t][0]
	case "shared":
		in.op = loadOps[t][1]
	}
	return nil
}

func decodeSt(b *body, in *inst, mn string, ops []string) error {
	if len(ops) != 2 {
		return fmt.Errorf("want 2 operands")
	}
	f := strings.Split(mn, ".")
	ss, t := f[1], typeOf(mn)
	var err error
	if in.a, in.imm, err = b.addr(ops[0], ss); err != nil {
		return err
	}
	if in.b, err = b.src(ops[1], t); err != nil {
		return err
	}
	bits := typeBits(t)
	ops8 := map[int][2]opcode{8: {opStG8, opStS8}, 16: {opStG16, opStS16}, 32: {opStG32, opStS32}, 64: {opStG64, opStS64}}
	i := 0
	if ss == "shared" {
		i = 1
	}
	in.op = ops8[bits][i]
	return nil
}

func isGlobal(op opcode) bool {
	return (op >= opLdG8u && op <= opLdG64) || (op >= opStG8 && op <= opStG64)
}

func isStore(op opcode) bool { return op >= opStG8 && op <= opStS64 }
