//go:build linux

package emu

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// A Kernel is one .entry of a module, decoded for the interpreter.
type Kernel struct {
	Name   string
	Params []Param
	// MaxNTID and ReqNTID are the .maxntid and .reqntid directives (zero
	// when absent).
	MaxNTID, ReqNTID [3]int
	// Shared is the kernel's static shared memory, laid out in declaration
	// order at each variable's alignment; SharedBytes is its size.
	Shared      []SharedVar
	SharedBytes int

	mod  *Module
	code []inst
	// lines[i] is the source line of code[i].
	lines []int32
	// The register file of a thread: the declared registers, then the
	// special registers (specials), the parameters (params), and the
	// constants the instructions read (consts).
	nslots   int
	specials int32
	params   int32
	consts   []uint64
	barriers bool // the kernel has a bar.sync
	// workers keeps the register files and shared memory of finished
	// launches for the next.
	workers sync.Pool
}

// A Param is a kernel parameter as the PTX declares it.
type Param struct {
	Name string
	// Type is the PTX type: u32, u64, f32, …
	Type string
	// Size is its size in bytes.
	Size int
	// Pointer reports that the kernel uses the parameter as a global
	// address (its value goes through cvta.to.global); Integer that it
	// uses it otherwise. A u64 parameter with neither is unused.
	Pointer, Integer bool
}

// A SharedVar is a .shared declaration: Size bytes at Offset of the block's
// shared memory.
type SharedVar struct {
	Name                string
	Offset, Size, Align int
}

// Module is a loaded PTX module.
type Module struct {
	// Name is how messages name the module's source (a file name).
	Name            string
	Version, Target string
	AddressSize     int
	Kernels         map[string]*Kernel
	lines           []string
}

// line returns the text of source line n (1-based), trimmed.
func (m *Module) line(n int32) string {
	if n < 1 || int(n) > len(m.lines) {
		return ""
	}
	return strings.TrimSpace(m.lines[n-1])
}

// A LoadError is PTX the emulator cannot load: a syntax it does not read or
// an instruction it does not implement, at File:Line.
type LoadError struct {
	File string
	Line int
	Msg  string
}

func (e *LoadError) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

// ParsePTX reads a PTX module. Every instruction must be one the
// interpreter implements: any other is a LoadError naming it and its line.
func ParsePTX(name, text string) (*Module, error) {
	p := &parser{m: &Module{Name: name, Kernels: map[string]*Kernel{}, lines: strings.Split(text, "\n")}}
	if err := p.module(); err != nil {
		return nil, err
	}
	return p.m, nil
}

type parser struct {
	m    *Module
	n    int // current line, 1-based
	text string
}

func (p *parser) errf(format string, args ...any) error {
	return &LoadError{File: p.m.Name, Line: p.n, Msg: fmt.Sprintf(format, args...)}
}

// next advances to the next line with content, comments removed; false at
// the end.
func (p *parser) next() bool {
	for p.n < len(p.m.lines) {
		p.n++
		s := p.m.lines[p.n-1]
		if i := strings.Index(s, "//"); i >= 0 {
			s = s[:i]
		}
		if s = strings.TrimSpace(s); s != "" {
			p.text = s
			return true
		}
	}
	return false
}

func (p *parser) module() error {
	for p.next() {
		f := strings.Fields(p.text)
		switch f[0] {
		case ".version":
			if len(f) != 2 {
				return p.errf("malformed .version")
			}
			p.m.Version = f[1]
		case ".target":
			p.m.Target = strings.Join(f[1:], " ")
		case ".address_size":
			if len(f) != 2 || f[1] != "64" {
				return p.errf(".address_size %s: only 64-bit addresses are emulated", strings.Join(f[1:], " "))
			}
			p.m.AddressSize = 64
		case ".visible", ".entry":
			if err := p.entry(); err != nil {
				return err
			}
		default:
			return p.errf("unsupported module-level directive %q (the emulator loads .version, .target, .address_size and .entry kernels)", f[0])
		}
	}
	if p.m.Version == "" || p.m.AddressSize == 0 {
		return &LoadError{File: p.m.Name, Line: 1, Msg: "not a PTX module (no .version or .address_size)"}
	}
	return nil
}

var entryRe = regexp.MustCompile(`^(?:\.visible\s+)?\.entry\s+([A-Za-z_$][\w$]*)\s*\(\s*$`)
var paramRe = regexp.MustCompile(`^\.param\s+\.(u8|s8|u16|s16|b16|u32|s32|b32|f32|u64|s64|b64|f64)\s+([A-Za-z_$][\w$]*)\s*,?$`)

func (p *parser) entry() error {
	m := entryRe.FindStringSubmatch(p.text)
	if m == nil {
		return p.errf("unsupported declaration %q (the emulator loads .entry kernels with one parameter a line)", p.text)
	}
	k := &Kernel{Name: m[1], mod: p.m}
	if _, dup := p.m.Kernels[k.Name]; dup {
		return p.errf("kernel %s defined twice", k.Name)
	}
	for {
		if !p.next() {
			return p.errf("kernel %s: unterminated parameter list", k.Name)
		}
		if p.text == ")" {
			break
		}
		pm := paramRe.FindStringSubmatch(p.text)
		if pm == nil {
			return p.errf("kernel %s: unsupported parameter %q", k.Name, p.text)
		}
		k.Params = append(k.Params, Param{Name: pm[2], Type: pm[1], Size: typeBits(pm[1]) / 8})
	}
	for {
		if !p.next() {
			return p.errf("kernel %s: no body", k.Name)
		}
		f := strings.Fields(strings.ReplaceAll(p.text, ",", " "))
		switch f[0] {
		case ".maxntid", ".reqntid":
			var d [3]int
			for i := range 3 {
				d[i] = 1
			}
			if len(f) < 2 || len(f) > 4 {
				return p.errf("malformed %s", f[0])
			}
			for i, s := range f[1:] {
				v, err := strconv.Atoi(s)
				if err != nil || v < 1 {
					return p.errf("malformed %s", f[0])
				}
				d[i] = v
			}
			if f[0] == ".maxntid" {
				k.MaxNTID = d
			} else {
				k.ReqNTID = d
			}
			continue
		case ".minnctapersm", ".maxnreg", ".maxnctapersm":
			continue // occupancy hints: nothing to emulate
		case "{":
		default:
			return p.errf("kernel %s: unsupported directive %q before the body", k.Name, f[0])
		}
		break
	}
	if err := p.body(k); err != nil {
		return err
	}
	p.m.Kernels[k.Name] = k
	return nil
}

// regRange is a register declaration: a plain name (n < 0) or name<n>,
// whose registers are slots base … base+n-1.
type regRange struct {
	base, n int32
}

// body decodes the instructions of k up to its closing brace.
type body struct {
	p      *parser
	k      *Kernel
	regs   map[string]regRange
	nregs  int32
	labels map[string]int32
	fixups []fixup
	shared map[string]int // name → offset
	consts map[uint64]int32
	// paramLoads maps a register to the parameter an ld.param loaded into
	// it, for classifying u64 parameters as pointers or integers.
	paramLoads map[int32]int
	insts      []pinst
}

type fixup struct {
	inst  int
	label string
	line  int
}

// pinst is an instruction before slot assignment of constants is final.
type pinst struct {
	in   inst
	line int32
}

var regDeclRe = regexp.MustCompile(`^\.reg\s+\.(pred|b8|u8|s8|b16|u16|s16|b32|u32|s32|f32|b64|u64|s64|f64)\s+(.+);$`)
var sharedRe = regexp.MustCompile(`^\.shared\s+(?:\.align\s+(\d+)\s+)?\.(b8|u8|s8|b16|u16|s16|b32|u32|s32|f32|b64|u64|s64|f64)\s+([A-Za-z_$][\w$]*)(?:\[(\d+)\])?;$`)
var labelRe = regexp.MustCompile(`^([A-Za-z_$][\w$]*):$`)

func (p *parser) body(k *Kernel) error {
	b := &body{p: p, k: k, regs: map[string]regRange{}, labels: map[string]int32{}, shared: map[string]int{},
		consts: map[uint64]int32{}, paramLoads: map[int32]int{}}
	depth := 1
	for depth > 0 {
		if !p.next() {
			return p.errf("kernel %s: unterminated body", k.Name)
		}
		t := p.text
		// Inline assembly comes as "{ instruction; }" on one line: the
		// braces open and close a scope around it.
		for len(t) > 1 && t[0] == '{' {
			depth++
			t = strings.TrimSpace(t[1:])
		}
		closes := 0
		for len(t) > 1 && t[len(t)-1] == '}' && strings.HasSuffix(strings.TrimSpace(t[:len(t)-1]), ";") {
			closes++
			t = strings.TrimSpace(t[:len(t)-1])
		}
		switch {
		case t == "{":
			depth++
		case t == "}":
			depth--
		case strings.HasPrefix(t, ".reg"):
			if err := b.declRegs(t); err != nil {
				return err
			}
		case strings.HasPrefix(t, ".shared"):
			if err := b.declShared(t); err != nil {
				return err
			}
		case strings.HasPrefix(t, ".pragma"):
			// Compiler hints (nounroll): nothing to emulate.
		case strings.HasPrefix(t, ".local"), strings.HasPrefix(t, ".const"), strings.HasPrefix(t, ".global"):
			return p.errf("kernel %s: unsupported state space in %q (the emulator has registers, .shared and .global memory through pointers)", k.Name, t)
		case labelRe.MatchString(t):
			name := t[:len(t)-1]
			if _, dup := b.labels[name]; dup {
				return p.errf("label %s defined twice", name)
			}
			b.labels[name] = int32(len(b.insts))
		default:
			if err := b.instruction(t); err != nil {
				return err
			}
		}
		depth -= closes
	}
	for _, f := range b.fixups {
		at, ok := b.labels[f.label]
		if !ok {
			p.n = f.line
			return p.errf("branch to undefined label %s", f.label)
		}
		b.insts[f.inst].in.imm = int64(at)
	}
	b.classifyParams()
	// Lay out the slots: registers, specials, parameters, constants.
	k.specials = b.nregs
	k.params = k.specials + numSpecials
	cbase := k.params + int32(len(k.Params))
	k.consts = make([]uint64, len(b.consts))
	for v, i := range b.consts {
		k.consts[i] = v
	}
	k.nslots = int(cbase) + len(k.consts)
	k.code = make([]inst, len(b.insts))
	k.lines = make([]int32, len(b.insts))
	for i, pi := range b.insts {
		in := pi.in
		in.d, in.a, in.b, in.c = b.final(in.d, cbase), b.final(in.a, cbase), b.final(in.b, cbase), b.final(in.c, cbase)
		in.pred = b.final(in.pred, cbase)
		if in.op == opBar {
			k.barriers = true
		}
		k.code[i] = in
		k.lines[i] = pi.line
	}
	// A kernel that runs off its end returns.
	k.code = append(k.code, inst{op: opExit, pred: -1})
	k.lines = append(k.lines, int32(p.n))
	return nil
}

// classifyParams marks each parameter loaded into a register that nothing
// else writes as a Pointer when that register goes through cvta.to.global
// or addresses global memory, and as an Integer when it is used otherwise.
// PTX declares pointers and 64-bit integers alike (.u64); this is how a
// launch tells them apart.
func (b *body) classifyParams() {
	writes := map[int32]int{}
	for _, pi := range b.insts {
		in := pi.in
		if in.d >= 0 && !isStore(in.op) {
			writes[in.d]++
		}
		if in.op == opUnpack64 || in.op == opUnpack32 {
			writes[in.c]++
		}
	}
	for _, pi := range b.insts {
		in := pi.in
		srcs := []int32{in.a, in.b, in.c}
		if in.op == opUnpack64 || in.op == opUnpack32 {
			srcs = srcs[:1]
		}
		for i, s := range srcs {
			p, ok := b.paramLoads[s]
			if !ok || writes[s] != 1 {
				continue
			}
			if in.op == opCvta || (i == 0 && isGlobal(in.op)) {
				b.k.Params[p].Pointer = true
			} else {
				b.k.Params[p].Integer = true
			}
		}
	}
}

// Operand slots are encoded while decoding as: ≥ 0 a register; -1 none;
// specialRef-i special register i; paramRef-i parameter i; constRef-i
// constant i. final turns them into slot indices.
const (
	noSlot     = -1
	specialRef = -1 << 20
	paramRef   = -2 << 20
	constRef   = -3 << 20
	refSpan    = 1 << 20
)

func (b *body) final(s, cbase int32) int32 {
	switch {
	case s >= 0 || s == noSlot:
		return s
	case s > specialRef-refSpan && s <= specialRef:
		return b.k.specials + (specialRef - s)
	case s > paramRef-refSpan && s <= paramRef:
		return b.k.params + (paramRef - s)
	default:
		return cbase + (constRef - s)
	}
}

func (b *body) declRegs(t string) error {
	m := regDeclRe.FindStringSubmatch(t)
	if m == nil {
		return b.p.errf("malformed register declaration %q", t)
	}
	for _, name := range strings.Split(m[2], ",") {
		name = strings.TrimSpace(name)
		n := int32(-1)
		if i := strings.IndexByte(name, '<'); i >= 0 {
			if !strings.HasSuffix(name, ">") {
				return b.p.errf("malformed register declaration %q", t)
			}
			v, err := strconv.Atoi(name[i+1 : len(name)-1])
			if err != nil || v < 1 || v > 1<<16 {
				return b.p.errf("malformed register count in %q", t)
			}
			name, n = name[:i], int32(v)
		}
		if !strings.HasPrefix(name, "%") || len(name) < 2 {
			return b.p.errf("malformed register name %q", name)
		}
		// A redeclaration in a nested scope (nvcc's %temp) reuses the
		// slots: scopes do not overlap in time.
		if r, ok := b.regs[name]; ok && r.n >= n {
			continue
		}
		count := max(n, 1)
		b.regs[name] = regRange{base: b.nregs, n: n}
		b.nregs += count
	}
	return nil
}

func (b *body) declShared(t string) error {
	m := sharedRe.FindStringSubmatch(t)
	if m == nil {
		return b.p.errf("unsupported shared declaration %q", t)
	}
	elem := typeBits(m[2]) / 8
	align := elem
	if m[1] != "" {
		align, _ = strconv.Atoi(m[1])
		if align < 1 || align&(align-1) != 0 {
			return b.p.errf("bad alignment in %q", t)
		}
	}
	n := 1
	if m[4] != "" {
		n, _ = strconv.Atoi(m[4])
	}
	if _, dup := b.shared[m[3]]; dup {
		return b.p.errf("shared variable %s declared twice", m[3])
	}
	off := (b.k.SharedBytes + align - 1) &^ (align - 1)
	b.k.Shared = append(b.k.Shared, SharedVar{Name: m[3], Offset: off, Size: n * elem, Align: align})
	b.k.SharedBytes = off + n*elem
	b.shared[m[3]] = off
	return nil
}

// reg returns the slot of register name.
func (b *body) reg(name string) (int32, error) {
	if r, ok := b.regs[name]; ok && r.n < 0 {
		return r.base, nil
	}
	i := len(name)
	for i > 0 && name[i-1] >= '0' && name[i-1] <= '9' {
		i--
	}
	if i < len(name) {
		if r, ok := b.regs[name[:i]]; ok && r.n > 0 {
			v, err := strconv.Atoi(name[i:])
			if err == nil && v < int(r.n) {
				return r.base + int32(v), nil
			}
		}
	}
	if s, ok := specialNames[name]; ok {
		return specialRef - int32(s), nil
	}
	return 0, b.p.errf("undeclared register %s", name)
}

// constant returns the slot of constant bits v.
func (b *body) constant(v uint64) int32 {
	i, ok := b.consts[v]
	if !ok {
		i = int32(len(b.consts))
		b.consts[v] = i
	}
	return constRef - i
}

// The special registers, in slot order.
const (
	spTidX = iota
	spTidY
	spTidZ
	spNtidX
	spNtidY
	spNtidZ
	spCtaidX
	spCtaidY
	spCtaidZ
	spNctaidX
	spNctaidY
	spNctaidZ
	numSpecials
)

var specialNames = map[string]int{
	"%tid.x": spTidX, "%tid.y": spTidY, "%tid.z": spTidZ,
	"%ntid.x": spNtidX, "%ntid.y": spNtidY, "%ntid.z": spNtidZ,
	"%ctaid.x": spCtaidX, "%ctaid.y": spCtaidY, "%ctaid.z": spCtaidZ,
	"%nctaid.x": spNctaidX, "%nctaid.y": spNctaidY, "%nctaid.z": spNctaidZ,
}

// typeBits is the width of a PTX type.
func typeBits(t string) int {
	switch t {
	case "pred":
		return 1
	case "b8", "u8", "s8":
		return 8
	case "b16", "u16", "s16", "f16":
		return 16
	case "b32", "u32", "s32", "f32":
		return 32
	case "b64", "u64", "s64", "f64":
		return 64
	}
	return 0
}

// instruction decodes one instruction line: [@[!]%p] mnemonic operands;
func (b *body) instruction(t string) error {
	if !strings.HasSuffix(t, ";") {
		return b.p.errf("expected an instruction ending in ';': %q", t)
	}
	t = strings.TrimSpace(t[:len(t)-1])
	in := inst{pred: noSlot, d: noSlot, a: noSlot, b: noSlot, c: noSlot}
	if strings.HasPrefix(t, "@") {
		sp := strings.IndexAny(t, " \t")
		if sp < 0 {
			return b.p.errf("malformed guard in %q", t)
		}
		g := t[1:sp]
		if strings.HasPrefix(g, "!") {
			in.predNeg, g = true, g[1:]
		}
		s, err := b.reg(g)
		if err != nil {
			return err
		}
		in.pred = s
		t = strings.TrimSpace(t[sp:])
	}
	mn, rest, _ := strings.Cut(t, " ")
	if i := strings.IndexByte(mn, '\t'); i >= 0 {
		mn, rest = mn[:i], mn[i:]+" "+rest
	}
	ops, err := splitOperands(strings.TrimSpace(rest))
	if err != nil {
		return b.p.errf("%s: %v", mn, err)
	}
	dec, ok := decoders[mn]
	if !ok {
		return b.p.errf("instruction %q is not implemented by the emulator (in %q)", mn, t)
	}
	if err := dec(b, &in, mn, ops); err != nil {
		return b.p.errf("%s: %v (in %q)", mn, err, t)
	}
	b.insts = append(b.insts, pinst{in: in, line: int32(b.p.n)})
	return nil
}

// splitOperands splits at top-level commas (not inside braces or brackets).
func splitOperands(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth < 0 {
				return nil, fmt.Errorf("unbalanced %q", s)
			}
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("unbalanced %q", s)
	}
	return append(out, strings.TrimSpace(s[start:])), nil
}

// dst decodes a destination register.
func (b *body) dst(s string) (int32, error) {
	if !strings.HasPrefix(s, "%") {
		return 0, fmt.Errorf("destination %q is not a register", s)
	}
	r, err := b.reg(s)
	if err == nil && r < 0 {
		return 0, fmt.Errorf("destination %q is read-only", s)
	}
	return r, err
}

// src decodes a source operand of type typ: a register, a special
// register, an immediate, or (for 32- and 64-bit moves) a shared
// variable's address.
func (b *body) src(s, typ string) (int32, error) {
	if strings.HasPrefix(s, "%") {
		return b.reg(s)
	}
	if off, ok := b.shared[s]; ok {
		return b.constant(uint64(off)), nil
	}
	v, err := immediate(s, typ)
	if err != nil {
		return 0, err
	}
	return b.constant(v), nil
}

// immediate parses a PTX constant as the bits of a value of type typ.
func immediate(s, typ string) (uint64, error) {
	if len(s) == 10 && (strings.HasPrefix(s, "0f") || strings.HasPrefix(s, "0F")) {
		v, err := strconv.ParseUint(s[2:], 16, 32)
		if err != nil {
			return 0, fmt.Errorf("bad float constant %q", s)
		}
		if typ == "f64" {
			return math.Float64bits(float64(math.Float32frombits(uint32(v)))), nil
		}
		return v, nil
	}
	if len(s) == 18 && (strings.HasPrefix(s, "0d") || strings.HasPrefix(s, "0D")) {
		v, err := strconv.ParseUint(s[2:], 16, 64)
		if err != nil {
			return 0, fmt.Errorf("bad double constant %q", s)
		}
		if typ == "f32" {
			return uint64(math.Float32bits(float32(math.Float64frombits(v)))), nil
		}
		return v, nil
	}
	if typ == "f32" || typ == "f64" {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, fmt.Errorf("bad constant %q", s)
		}
		if typ == "f32" {
			return uint64(math.Float32bits(float32(f))), nil
		}
		return math.Float64bits(f), nil
	}
	s = strings.TrimSuffix(strings.TrimSuffix(s, "U"), "u")
	if v, err := strconv.ParseInt(s, 0, 64); err == nil {
		return uint64(v), nil
	}
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		return 0, fmt.Errorf("bad operand %q", s)
	}
	return v, nil
}

// addr decodes a memory operand [base], [base+off] or [base+-off] in state
// space ss: the base's slot and the offset.
func (b *body) addr(s, ss string) (int32, int64, error) {
	if !strings.HasPrefix(s, "[") || !strings.HasSuffix(s, "]") {
		return 0, 0, fmt.Errorf("%q is not an address", s)
	}
	s = strings.TrimSpace(s[1 : len(s)-1])
	base, off := s, int64(0)
	if i := strings.IndexByte(s, '+'); i >= 0 {
		var err error
		base = strings.TrimSpace(s[:i])
		off, err = strconv.ParseInt(strings.TrimSpace(s[i+1:]), 0, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("bad offset in [%s]", s)
		}
	}
	if ss == "param" {
		for i, p := range b.k.Params {
			if p.Name == base {
				if off != 0 {
					return 0, 0, fmt.Errorf("offset into a scalar parameter")
				}
				return paramRef - int32(i), 0, nil
			}
		}
		return 0, 0, fmt.Errorf("no parameter %s", base)
	}
	if strings.HasPrefix(base, "%") {
		r, err := b.reg(base)
		return r, off, err
	}
	if o, ok := b.shared[base]; ok && ss == "shared" {
		return b.constant(uint64(o)), off, nil
	}
	if _, err := strconv.ParseInt(base, 0, 64); err == nil {
		return 0, 0, fmt.Errorf("absolute address [%s]", s)
	}
	return 0, 0, fmt.Errorf("unknown symbol %s in the %s space", base, ss)
}
