/* cl_rec.h — internal: tracked-command records (slots, free lists) and every change of a record's state. */
#ifndef KT_CL_REC_H
#define KT_CL_REC_H

#include <ktiming.h>
#include <ktiming/cl.h>

#include <stdatomic.h>
#include <stdint.h>

#define SLOT_BITS 24u
#define SLOT_MASK ((1u << SLOT_BITS) - 1u)
#define CHUNK_SHIFT 10u
#define CHUNK_SIZE (1u << CHUNK_SHIFT)
#define MAX_CHUNKS (1u << (SLOT_BITS - CHUNK_SHIFT))
#define NAME_CAP 96

/* One tracked command: one cache line, since it crosses from the enqueuing thread to the completion thread and
 * back for every command. Its state (the tag) is changed only by the kt__cl_rec_* functions of cl_rec.c. */
typedef struct kt__cl_rec_t {
    _Alignas(64) _Atomic uint64_t tag; /* generation << 3 | state */
    _Atomic uint32_t next_free;        /* free-list link: slot + 1 of the next free record, 0 = end */
    _Atomic int cb_status;             /* status a callback delivered while the record was peeked */
    uint32_t slot;                     /* own index */
    kt_kernel_id_t kernel;             /* interned name */
    kt_cl_ctx_t *ctx;                  /* attached queue the command belongs to */
    cl_event event;                    /* retained by ktiming while tracked */
    uint64_t enqueue_ns;               /* host time of the enqueue */
    uint64_t observed_ns;              /* host-timed queues: when the callback saw the completion (0: unknown) */
    uint32_t thread;                   /* kt_thread_ordinal() of the enqueuing thread */
    _Atomic uint32_t qnext;            /* polled records: the next of its queue's FIFO (slot + 1, 0 = last) */
} kt__cl_rec_t;
_Static_assert(sizeof(kt__cl_rec_t) == 64, "a record is one cache line");

/* ---- slots ---- */

/* The record of a slot (NULL when its chunk was never allocated). */
kt__cl_rec_t *kt__cl_slot_rec(uint32_t slot);
/* Slots ever handed out (the bound of a scan over all of them). */
uint32_t kt__cl_slots_used(void);
/* A free record (state FREE), or NULL when out of slots or memory. */
kt__cl_rec_t *kt__cl_slot_alloc(void);
/* Return a record (owned: CLAIMED or never published) to the free list, bumping its generation. */
void kt__cl_slot_free(kt__cl_rec_t *r);
/* The verbose-mode name buffer of a record (NAME_CAP bytes; "" when verbose is off). */
char *kt__cl_rec_name(const kt__cl_rec_t *r);
/* The bytes its command moves (transfers; 0 for kernels), kept beside the record. */
uint64_t *kt__cl_rec_bytes(const kt__cl_rec_t *r);
/* Its launch configuration (kt_dispatch_t.launch; kind 0 = none), kept beside the record. */
kt_launch_t *kt__cl_rec_launch(const kt__cl_rec_t *r);

/* ---- states ----
 * A callback gets a handle (slot plus the record's generation) so a late callback for a record already finished
 * or reused finds a different generation and does nothing. Ownership moves by compare-and-swap: PENDING ->
 * CLAIMED (a callback or a flush completes it) or PENDING -> PEEKED (a flush looks at the event's status; a
 * callback arriving meanwhile leaves its status and flips PEEKED -> PEEKED_CB, and the flush completes the record
 * for it). Whoever moves a record to CLAIMED records it, releases the event (exactly once) and frees the slot.
 * The tracking thread publishes a callback record as PEEKED and holds it so through clSetEventCallback (hold /
 * hold_end). Polled records (POLLED) have no callback: POLLED -> PEEKED while a poller looks, back to POLLED if
 * the command is still running, or -> CLAIMED. */

/* The record's current generation. */
uint64_t kt__cl_rec_gen(const kt__cl_rec_t *r);
/* Tracking thread: publish as POLLED. */
void kt__cl_rec_set_polled(kt__cl_rec_t *r, uint64_t gen);
/* Tracking thread: publish as PEEKED, held through clSetEventCallback. */
void kt__cl_rec_hold(kt__cl_rec_t *r, uint64_t gen);
/* Tracking thread, after clSetEventCallback succeeded: PEEKED -> PENDING (1), or the callback came during the
 * call (0: the record is CLAIMED, its status in cb_status, for the caller to finish). */
int kt__cl_rec_hold_end(kt__cl_rec_t *r, uint64_t gen);
/* The handle a callback gets. */
void *kt__cl_rec_handle(const kt__cl_rec_t *r, uint64_t gen);
/* A callback with the handle: 1 when it claimed the record (CLAIMED, status in cb_status, *out set; the caller
 * finishes it), 0 when there is nothing to do (stale handle, or a peeking flush takes the status). */
int kt__cl_rec_callback(void *handle, cl_int status, kt__cl_rec_t **out);
/* Flush: PENDING -> PEEKED (1, *gen set), or 0 when it is not a pending callback record. */
int kt__cl_rec_peek(kt__cl_rec_t *r, uint64_t *gen);
/* Flush: a peeked record -> CLAIMED (a callback that lands now finds it claimed). */
void kt__cl_rec_peek_claim(kt__cl_rec_t *r, uint64_t gen);
/* Flush: PEEKED -> PENDING (1), or the callback came while it looked (0: CLAIMED, its status in cb_status). */
int kt__cl_rec_unpeek(kt__cl_rec_t *r, uint64_t gen);
/* Poller: POLLED -> PEEKED (1, *gen set), or 0 when it is not a polled record. */
int kt__cl_rec_poll_begin(kt__cl_rec_t *r, uint64_t *gen);
/* Poller: a peeked polled record -> CLAIMED (done) or back to POLLED. */
void kt__cl_rec_poll_end(kt__cl_rec_t *r, uint64_t gen, int done);
/* Poller holding the poll lock: a POLLED record -> CLAIMED (abandoned). */
void kt__cl_rec_poll_take(kt__cl_rec_t *r);
/* Callback records (PENDING, or PEEKED by a flush) exist: a flush scans the slots for them only then. */
int kt__cl_rec_any_callback(void);

#endif
