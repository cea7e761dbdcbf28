//go:build linux && cgo

package sysmem

// Under ulimit -v every thread's malloc arena (64 MiB of address space)
// counts: see the package doc. This runs as the process starts, before the
// Go runtime has started a thread, so that every thread shares the one.

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
