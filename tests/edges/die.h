/* die.h — how the crash programs of the run tests die as asked (clcrashprog, cucrashprog, cupticrashprog):
 * "kill" sends SIGKILL to the process itself, "segv" writes to an unmapped page; anything else returns. */
#ifndef KT_TESTS_EDGES_DIE_H
#define KT_TESTS_EDGES_DIE_H

#include <signal.h>
#include <stdint.h>
#include <string.h>

static inline void ktt_die_as_asked(const char *mode, int argc)
{
    if (!strcmp(mode, "kill"))
        raise(SIGKILL);
    if (!strcmp(mode, "segv")) { /* a write to an unmapped page (an address the compiler cannot see) */
        volatile int *bad = (volatile int *)(uintptr_t)(unsigned)(argc * 2);
        *bad = 1;
    }
}

#endif
