//go:build linux && cgo

package onearena

// The constructor runs as the process starts, before the Go runtime has
// started a thread, so that every thread shares the one arena.

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
