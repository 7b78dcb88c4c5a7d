/*
 * mem_budget.h - the memory budget of --max-memory (SPEC 11): what
 * request arrays, answers and pinned scene versions may hold together.
 *
 * A request takes its share before it allocates: from Content-Length
 * when the headers come (a chunked body as its chunks come), the answer's
 * arrays before the query runs, and what an `all` answer holds beyond
 * that once it is known. Over the budget it is refused with 503 and
 * Retry-After, nothing allocated. A scene version that a PATCH or DELETE
 * replaced while queries still read it is counted too ("pinned") until
 * its last reader lets go; that share is taken whatever the budget says
 * (the PATCH has happened), so new requests wait for it instead.
 * Everything is given back when the request is freed (after its answer
 * went out, or its client went away).
 *
 * Threads: any; the counts are atomics.
 */
#ifndef RBD_MEM_BUDGET_H
#define RBD_MEM_BUDGET_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct rbd_budget {
    uint64_t limit;
    _Atomic uint64_t used, peak;
    _Atomic uint64_t refused; /* requests refused for it */
} rbd_budget;

/* limit 0: half of the machine's memory, or of the cgroup's limit when
 * that is lower (containers). */
void budget_init(rbd_budget *b, uint64_t limit);

/* Takes bytes: 0, or -1 (nothing taken, refused counted) when used +
 * bytes would pass the limit. */
int budget_take(rbd_budget *b, uint64_t bytes);
/* The same without counting a refusal: for what the server can do
 * without (a merged call's arrays, a trial), nobody is refused then. */
int budget_try(rbd_budget *b, uint64_t bytes);
/* Takes bytes whatever the limit (pinned versions). */
void budget_force(rbd_budget *b, uint64_t bytes);
void budget_give(rbd_budget *b, uint64_t bytes);

/* Bytes a body of `bytes` costs while it is parsed: binary records are
 * the body; JSON numbers become floats 2 to 3 times their text's size
 * at worst ("0," is 2 bytes, a float 4). */
uint64_t budget_body_bytes(int json, uint64_t bytes);

#endif
