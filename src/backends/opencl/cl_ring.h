/* cl_ring.h — internal: the bounded lock-free ring of records claimed by completion callbacks. */
#ifndef KT_CL_RING_H
#define KT_CL_RING_H

#include <stdint.h>

/* Every cell free (once, before the first push). */
void kt__cl_ring_init(void);
/* Push a claimed record's slot (any thread); 0, or -1 when the ring is full. seq_cst: with the load in the
 * collector's wake and its store + head load (kt__cl_ring_nonempty), either the collector sees this position
 * claimed or the producer sees it asleep. */
int kt__cl_ring_push(uint32_t slot);
/* Something is queued (or being written). */
int kt__cl_ring_nonempty(void);
/* Finish the queued records (at most max); with `wait`, wait for another drainer instead of leaving. */
unsigned kt__cl_ring_drain(unsigned max, int wait);
/* fork: the drain lock taken (prepare) or released (parent, child). */
void kt__cl_ring_fork_lock(void);
void kt__cl_ring_fork_unlock(void);

#endif
