/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash filter: the record of what an import was sent,
 * shared by record.c (the record), sent.c (each read checked and
 * recorded), held.c (the bytes it keeps) and readfollow.c (a plain
 * digest hashed in order from them).  Only those four include it; the
 * rest of the filter sees filter.h's interface.
 */
#ifndef NBDKIT_BLKHASH_SENT_H
#define NBDKIT_BLKHASH_SENT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "filter.h"

/* held.c: bytes of granules kept for the import, in memory up to
 * HELD_MEMORY, then in an unlinked file up to the spill bound; the
 * list of which bytes each granule holds in memory up to HELD_META.
 * Every call with the record's lock held.
 */
#define HELD_MEMORY (UINT64_C (64) * 1024 * 1024)
#define HELD_META (UINT64_C (64) * 1024 * 1024)

struct held_range { uint32_t a, b; };

/* A granule whose digest the record knows is held whole or not at
 * all: re-reads of what it holds are compared with it.
 */
struct held_gran {
  uint64_t idx;                 /* granule number */
  uint32_t len;                 /* its length (the last may be short) */
  uint32_t have;                /* bytes held */
  struct held_range *r;         /* which: sorted, disjoint, not touching */
  uint32_t nr, cap;
  uint8_t *data;                /* in memory, or NULL */
  int64_t slot;                 /* else its slot in the file */
  struct held_gran *next;       /* hash chain */
};

struct blkhash_held {
  uint32_t gsize;
  uint64_t size;
  struct held_gran **buckets;
  size_t nbuckets, count;
  uint64_t mem;                 /* granule data in memory */
  uint64_t meta;                /* granules, ranges, buckets */
  uint64_t spill_max;           /* blkhash-expect-spill */
  int fd;                       /* the file, or -1 until needed */
  uint64_t slots;               /* slots the file has */
  int64_t *free_slots;
  size_t nfree, free_cap;
  uint64_t reserved;            /* granules promised to readers */
  uint64_t peak;                /* most granules held at once */
  char why[256];                /* why the last call failed */
};

extern void held_init (struct blkhash_held *h, uint32_t gsize, uint64_t size,
                       uint64_t spill_max);
extern void held_fini (struct blkhash_held *h);
extern struct held_gran *held_find (const struct blkhash_held *h,
                                    uint64_t idx);
/* Is there room for n more granules besides those reserved, and their
 * bookkeeping?  Else false with why set.
 */
extern bool held_room (struct blkhash_held *h, uint64_t n);
/* Compare what g holds of [a, b) (offsets in the granule) with buf
 * (NULL: zeros): 0 the same, 1 not (*at: the first byte that is not),
 * -1 with why set if the file failed.
 */
extern int held_compare (struct blkhash_held *h, const struct held_gran *g,
                         uint32_t a, uint32_t b, const uint8_t *buf,
                         uint32_t *at);
/* Keep [a, b) of granule idx from buf (NULL: zeros), making the
 * granule (from a reservation if reserved) if need be: the number of
 * bytes it did not hold, or -1 with why set.  *gp: the granule.
 */
extern int64_t held_put (struct blkhash_held *h, uint64_t idx, uint32_t a,
                         uint32_t b, const uint8_t *buf, bool reserved,
                         struct held_gran **gp);
/* Copy held bytes [a, b) of g into out: 0, or -1 with why set. */
extern int held_get (struct blkhash_held *h, const struct held_gran *g,
                     uint32_t a, uint32_t b, uint8_t *out);
/* The end of the run of held bytes of g from a (a if a is not held). */
extern uint32_t held_run (const struct held_gran *g, uint32_t a);
extern void held_drop (struct blkhash_held *h, struct held_gran *g);

/* A reader waiting for its turn in the plain digest. */
struct sent_waiter {
  uint64_t offset;
  struct sent_waiter *next;
};

/* record.c: the record of one import (one content of one session). */
struct blkhash_sent {
  pthread_mutex_t lock;
  pthread_cond_t moved;         /* pos moved, busy, inflight, promised */
  const char *name;             /* the export's, for messages */
  uint64_t size;
  uint32_t gsize;
  const struct blk_params *p;   /* granules' digests: the value's, or
                                   sha256 over 256K for a plain digest */
  struct blk_table *t;          /* granules sent whole (or known zero) */
  uint64_t snapshot;
  struct blkhash_held held;
  uint64_t got;                 /* bytes sent or known zero */
  bool done;                    /* the digest is final */
  uint8_t digest[BLK_DIGEST_MAX];
  /* A plain digest (readfollow.c), NULL run for a blkhash value. */
  struct blkhash_plain *run;
  uint64_t pos;                 /* [0, pos) hashed */
  bool busy;                    /* a thread hashes at pos */
  bool failed;                  /* hashing failed */
  unsigned inflight;            /* readers between enter and leaving */
  unsigned waiting;             /* ... of them waiting for their turn */
  unsigned promised;            /* readers owing the digest their data */
  unsigned grace_misses;
  struct sent_waiter *waiters;
  uint64_t in_turn, from_held, zeroed;  /* for the debug line */
};

/* readfollow.c, with the record's lock held: give the plain digest
 * [offset, offset+count) of buf, which the record has (its turn, or
 * kept; leaves the reader: its reserved granules are used or given
 * back); hash what waits at pos; and at the end, wait for readers
 * owing data, then hash everything held (0, or -1 with *err set and
 * nbdkit_error called).
 */
extern void follow_data (struct blkhash_sent *s, const uint8_t *buf,
                         uint64_t offset, uint32_t count, uint64_t reserved);
extern void follow_drain (struct blkhash_sent *s);
extern int follow_final (struct blkhash_sent *s, uint8_t *out, int *err);
/* record.c: fail the request, saying why what was sent cannot be
 * verified: -1 with *err set.
 */
extern int sent_fail (struct blkhash_sent *s, int *err, const char *fmt, ...)
  __attribute__ ((format (printf, 3, 4)));
/* The length of granule gi (the last may be short). */
extern uint32_t sent_gran_len (const struct blkhash_sent *s, uint64_t gi);
/* The digest of granule gi as zeros into out: 0, or -1. */
extern int sent_zero_digest (struct blkhash_sent *s, uint64_t gi,
                             uint8_t *out);
/* Is granule gi known (from the table) to be all zeros? */
extern bool sent_gran_zero (struct blkhash_sent *s, uint64_t gi);
/* A reader leaves; lock held. */
extern void sent_leave (struct blkhash_sent *s);

#endif /* NBDKIT_BLKHASH_SENT_H */
