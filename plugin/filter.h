/* nbdkit-blkhash filter: declarations shared by the filter's files. */
#ifndef NBDKIT_BLKHASH_FILTER_H
#define NBDKIT_BLKHASH_FILTER_H

#include <stdbool.h>
#include <stdatomic.h>
#include <stdint.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-filter.h>

#include "blkhash.h"
#include "header.h"
#include "table.h"

/* Work counters, logged at each disconnect with -D blkhash.stats=1. */
struct blkhash_stats {
  _Atomic uint64_t passive_blocks;      /* hashed from client traffic */
  _Atomic uint64_t computed_blocks;     /* hashed on demand */
  _Atomic uint64_t hole_blocks;         /* known zero from extents */
  _Atomic uint64_t read_bytes;          /* read from the plugin to hash */
};
extern struct blkhash_stats blkhash_stats;

/* Parameters (blkhash.c). */
extern const struct blk_params *blkhash_default_params;
extern const char *blkhash_file;
extern bool blkhash_cache;

/* params.c: digest and block size combinations, created on demand and
 * kept until unload.  NULL with nbdkit_error called on bad values.
 */
extern const struct blk_params *blkhash_params_get (const char *digest,
                                                    uint64_t block_size);
extern void blkhash_params_free_all (void);

/* exports.c: shared state of one export (name and size). */
struct blkhash_export;

/* A data write bracketed on every table of its export. */
#define BLKHASH_MAX_TABLES 16
struct blkhash_write {
  struct blkhash_export *e;
  size_t ntables;
  struct blk_table *tables[BLKHASH_MAX_TABLES];
  struct blk_write writes[BLKHASH_MAX_TABLES];
};

extern struct blkhash_export *blkhash_export_get (const char *name,
                                                  uint64_t size);
/* Returns the number of handles still using the export. */
extern unsigned blkhash_export_put (struct blkhash_export *e);
/* Free the tables of an unused export when caching is off. */
extern void blkhash_export_trim (struct blkhash_export *e);
extern const char *blkhash_export_name (const struct blkhash_export *e);
extern struct blk_table *blkhash_export_table (struct blkhash_export *e,
                                               const struct blk_params *p);
extern void blkhash_write_begin (struct blkhash_export *e,
                                 struct blkhash_write *w,
                                 uint64_t offset, uint64_t count);
/* End the write everywhere; t (may be NULL) stores what done says was
 * written (done NULL: the write failed or is not to be stored).
 */
extern void blkhash_write_end (struct blkhash_write *w,
                               const struct blk_table *t,
                               const struct blk_written *done);
extern void blkhash_export_set_result (struct blkhash_export *e,
                                       const uint8_t *root);
extern int blkhash_results_write (void);
extern void blkhash_exports_free_all (void);

/* hasher.c: compute block digests through the plugin. */
extern int blkhash_hasher_init (void);
extern void blkhash_hasher_fini (void);
extern EVP_MD_CTX *blkhash_thread_ctx (void);
extern int blkhash_compute (nbdkit_next *next, struct blk_table *t,
                            uint64_t first, uint64_t count, uint8_t *out,
                            int *err);
extern int blkhash_compute_root (nbdkit_next *next, struct blk_table *t,
                                 uint8_t *root, int *err);

/* Largest share of the root fold done by one request, in digest bytes. */
#define BLKHASH_FOLD_BUDGET (32 * 1024 * 1024)

/* view.c: the read-only NAME@blkhash export. */
struct blkhash_view;
extern struct blkhash_view *blkhash_view_new (struct blk_table *t);
extern void blkhash_view_free (struct blkhash_view *v);
extern int64_t blkhash_view_size (const struct blkhash_view *v);
extern int blkhash_view_pread (nbdkit_next *next, struct blkhash_view *v,
                               void *buf, uint32_t count, uint64_t offset,
                               int *err);
extern int blkhash_view_cache (nbdkit_next *next, struct blkhash_view *v,
                               uint32_t count, uint64_t offset, int *err);

/* passive.c: hashing what passes through a data export.  t is the
 * table that keeps passive digests, or NULL when caching is off.
 */
extern int blkhash_passive_pread (nbdkit_next *next, struct blk_table *t,
                                  void *buf, uint32_t count, uint64_t offset,
                                  uint32_t flags, int *err);
extern int blkhash_passive_pwrite (nbdkit_next *next,
                                   struct blkhash_export *e,
                                   struct blk_table *t, const void *buf,
                                   uint32_t count, uint64_t offset,
                                   uint32_t flags, int *err);
extern int blkhash_passive_zero (nbdkit_next *next, struct blkhash_export *e,
                                 struct blk_table *t, uint32_t count,
                                 uint64_t offset, uint32_t flags, int *err);
extern int blkhash_passive_trim (nbdkit_next *next, struct blkhash_export *e,
                                 uint32_t count, uint64_t offset,
                                 uint32_t flags, int *err);

#endif /* NBDKIT_BLKHASH_FILTER_H */
