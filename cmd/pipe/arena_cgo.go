//go:build linux && cgo

package main

// Under an address-space limit (ulimit -v), pipe keeps glibc's malloc to one
// arena. glibc gives each thread that mallocs an arena of its own, 64 MiB
// of address space each, up to 8 a core, and in a cgo build (the default
// one links the C library, for DNS and user look-ups) the Go runtime
// mallocs in every thread that starts another: pipe on 2 cores held 7 of
// them (448 MiB), where the Go runtime's own reservations already take 1.2
// GiB. Without such a limit an arena's untouched address space costs
// nothing, and nothing is changed. This runs as the process starts, before
// the Go runtime has started a thread, so that every thread shares the
// one; it is the program's decision, so the library does not make it.

/*
#include <malloc.h>
#include <sys/resource.h>

__attribute__((constructor)) static void pipeOneArena(void) {
#ifdef M_ARENA_MAX
	struct rlimit rl;
	if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
		mallopt(M_ARENA_MAX, 1);
	}
#endif
}
*/
import "C"
