/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash filter: declarations shared by the filter's files.
 * (lib/blkhash.h is the construction; this is the filter.)
 */
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
#include "util.h"

/* nbdkit_error, and nbdkit_debug for messages naming an export, with
 * the bytes a terminal acts on written as \xHH (blk_escape_controls):
 * a client chooses the name of the export it asks for (log.c).
 */
extern void blkhash_error (const char *fmt, ...)
  __attribute__ ((format (printf, 1, 2)));
extern void blkhash_debug (const char *fmt, ...)
  __attribute__ ((format (printf, 1, 2)));

/* Work counters, logged at each disconnect with -D blkhash.stats=1. */
struct blkhash_stats {
  _Atomic uint64_t passive_blocks;      /* hashed from client traffic */
  _Atomic uint64_t computed_blocks;     /* hashed on demand */
  _Atomic uint64_t hole_blocks;         /* known zero from extents */
  _Atomic uint64_t read_bytes;          /* read from the plugin to hash */
  _Atomic uint64_t paired_reads;        /* pieces read by a reader */
};
extern struct blkhash_stats blkhash_stats;

/* config.c: the filter's lifetime callbacks, and the parameters they
 * parse.
 */
extern void blkhash_load (void);
extern void blkhash_unload (void);
extern int blkhash_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
                           const char *key, const char *value);
extern int blkhash_config_complete (nbdkit_next_config_complete *next,
                                    nbdkit_backend *nxdata);
extern const char blkhash_config_help[];
extern void blkhash_cleanup (nbdkit_backend *backend);
#ifdef HAVE_STRUCT_NBDKIT_FILTER_DUMP_PLUGIN
extern void blkhash_dump_plugin (void);
#endif
extern int blkhash_get_ready (int thread_model);
/* With -D blkhash.stats=1, the work counters, naming the export whose
 * last client left.
 */
struct blkhash_export;
extern void blkhash_log_stats (struct blkhash_export *e);
/* blkhash-views-only=true: the data exports are refused, their views
 * served, so a host can let others check images it does not let them
 * read.
 */
extern bool blkhash_views_only;
extern const struct blk_params *blkhash_default_params;
extern const char *blkhash_file;
extern const char *blkhash_file_name;   /* the default export's name there */
/* blkhash-cache=true: digests outlive their session (only this nbdkit
 * writes the image).
 */
extern bool blkhash_cache;
/* Threads computing a root that needs everything (blkhash-workers,
 * 1 unless the plugin takes parallel requests).
 */
#define BLKHASH_MAX_WORKERS 64
extern unsigned blkhash_workers;
/* blkhash-readahead (see readahead.c). */
enum blkhash_readahead {
  BLKHASH_READAHEAD_AUTO,               /* slow reads and idle CPUs */
  BLKHASH_READAHEAD_ON,                 /* every run of two pieces or more */
  BLKHASH_READAHEAD_OFF,
};
extern enum blkhash_readahead blkhash_readahead;
/* The plugin takes requests from several threads at once (from
 * .get_ready): else the filter's own threads never call it.
 */
extern bool blkhash_plugin_parallel;

/* The most one plugin read asks for (see hasher.c). */
#define BLKHASH_READ_SIZE (256 * 1024)

/* params.c: the registry of digest and block size combinations,
 * created on demand and kept until unload; aliases of a digest share
 * one entry.  NULL with nbdkit_error called on bad values, naming what
 * gave them (NULL: the parameters).
 */
extern const struct blk_params *blkhash_params_get (const char *what,
                                                    const char *digest,
                                                    uint64_t block_size);
extern void blkhash_params_free_all (void);
/* params.c: blkhash-max-size, the largest export whose checksum is
 * computed: the value given (0: no limit), or the defaults
 * (BLK_MAX_SIZE, BLK_MAX_PLAIN_SIZE for plain digests).  _config
 * parses it (0, or -1 with nbdkit_error called).  _over: is size over
 * the limit?  Then msg says "N bytes (H), over the limit of L".
 */
#define BLKHASH_MAX_SIZE_LIFTS "blkhash-max-size=SIZE lifts it (0: no limit)"
extern int blkhash_max_size_config (const char *value);
/* Is an export of size bytes over blkhash-max-size for a blkhash
 * checksum of p (lib's blk_work_size), or a plain digest (p NULL)?
 * Then msg says so.
 */
extern bool blkhash_size_over (uint64_t size, const struct blk_params *p,
                               char *msg, size_t len);

/* order.c: refuse to start behind a filter that would see the views as
 * data (0, or -1 with nbdkit_error called), once every filter is
 * loaded; blkhash_order_loaded is called by each .load.  The name
 * nbdkit's plugin gives itself ("file", "null"), once the check
 * passed.
 */
extern void blkhash_order_loaded (void);
extern int blkhash_order_check (void);
extern const char *blkhash_plugin_name (void);
/* Can holes be taken from the extents of the layer below (not behind
 * a filter whose extents may call data a hole)?
 */
extern bool blkhash_extents_usable (nbdkit_next *next);

/* exports.c: the shared state of each export (name and size) and its
 * block tables (see the notes at the top of exports.c).
 */
struct blkhash_export;
struct blkhash_table;

/* Idle exports kept with blkhash-cache=true, and their table memory. */
#define BLKHASH_IDLE_EXPORTS 64
#define BLKHASH_IDLE_MEMORY (UINT64_C (256) * 1024 * 1024)

extern void blkhash_exports_init (void);
/* The next value of the session clock. */
extern uint64_t blkhash_session_tick (void);
/* A user of the export: NULL with nbdkit_error called if out of
 * memory.  Let go with blkhash_export_put, then blkhash_export_release.
 */
extern struct blkhash_export *blkhash_export_get (const char *name,
                                                  uint64_t size);
/* One user fewer, one that finished (finalize); returns how many are
 * left (0: its session ended).  The caller still holds the export
 * until blkhash_export_release.
 */
extern unsigned blkhash_export_put (struct blkhash_export *e);
/* The same for a user nbdkit closed without finalizing (its handshake
 * failed): *line_owed if the session ended and a user that finished
 * left its blkhash-file line to this one, which cannot compute it.
 */
extern unsigned blkhash_export_abandon (struct blkhash_export *e,
                                        bool *line_owed);
extern void blkhash_export_release (struct blkhash_export *e);
extern const char *blkhash_export_name (const struct blkhash_export *e);
extern uint64_t blkhash_export_size (const struct blkhash_export *e);
/* The session clock from which digests serve this export's session
 * (0: any, with blkhash-cache=true).
 */
extern uint64_t blkhash_export_since (const struct blkhash_export *e);
/* Has a write through any export begun since the last clear? */
extern bool blkhash_export_changed (struct blkhash_export *e);
extern void blkhash_export_clear_changed (struct blkhash_export *e);
/* Bytes written (or zeroed, or trimmed) through e: credit that a
 * flush may spend reading what its table does not know.  spend takes
 * bytes from it, or returns false and takes nothing if there are
 * fewer.
 */
extern void blkhash_export_credit (struct blkhash_export *e, uint64_t bytes);
extern bool blkhash_export_spend (struct blkhash_export *e, uint64_t bytes);
/* true the first time it is asked in a session (from the first user
 * on): a flush then marks the export's holes, once.
 */
extern bool blkhash_export_first_look (struct blkhash_export *e);
/* fn on every export, each held meanwhile. */
extern void blkhash_exports_foreach (void (*fn) (struct blkhash_export *e));
extern void blkhash_exports_free_all (void);

/* A reference to the export's table for p, created if needed, holding
 * only digests read after session clock since (reset first if need
 * be).  NULL with *err set and nbdkit_error called when out of memory.
 */
extern struct blkhash_table *blkhash_table_get (struct blkhash_export *e,
                                                const struct blk_params *p,
                                                uint64_t since, int *err);
/* The same for the table of the range r of the export (its blocks
 * those of r: see range.c).
 */
extern struct blkhash_table *blkhash_table_get_range
  (struct blkhash_export *e, const struct blk_params *p,
   const struct blk_range *r, uint64_t since, int *err);
/* The same, as it is, but NULL when the export has no such table. */
extern struct blkhash_table *blkhash_table_find (struct blkhash_export *e,
                                                 const struct blk_params *p);
extern void blkhash_table_put (struct blkhash_export *e,
                               struct blkhash_table *bt);
extern struct blk_table *blkhash_table_blocks (const struct blkhash_table *bt);

/* A data write (or zero, or trim) bracketed on every table of every
 * export, from before the plugin call to after it: the tables of its
 * own export by range, the others whole.
 */
#define BLKHASH_WRITE_INLINE 8
struct blkhash_write {
  size_t ntables;
  size_t nown;                  /* tables[0..nown): its export's */
  struct blk_table **tables;
  struct blk_write *writes;
  struct blk_table *tables_inline[BLKHASH_WRITE_INLINE];
  struct blk_write writes_inline[BLKHASH_WRITE_INLINE];
};
/* 0, or -1 with *err set (out of memory). */
extern int blkhash_write_begin (struct blkhash_export *e,
                                struct blkhash_write *w,
                                uint64_t offset, uint64_t count, int *err);
/* End the write everywhere; t (may be NULL) stores what done says was
 * written (done NULL: the write failed or is not to be stored).
 */
extern void blkhash_write_end (struct blkhash_write *w,
                               const struct blk_table *t,
                               const struct blk_written *done);
/* The write clock: a data write through any export counted in as it
 * begins (before blkhash-file lines are looked for), and out once every
 * table saw it end.
 */
extern void blkhash_writes_count_begin (void);
extern void blkhash_writes_count_end (void);
/* A stamp of the data writes through any export so far in *stamp:
 * false if one is in flight, and then a stamp that nothing matches
 * (what is computed now may hold digests from before that write
 * ended).  Whether any began or was in flight since a stamp.
 */
extern bool blkhash_writes_stamp (uint64_t *stamp);
extern bool blkhash_writes_since (uint64_t stamp);

/* results.c: blkhash-file (see the notes at the top of results.c). */
/* Check blkhash-file=PATH (absolute) and lock it at start-up. */
extern int blkhash_results_open (const char *path);
/* The last client of e has gone: complete its checksum, record it. */
extern void blkhash_results_session_end (nbdkit_next *next,
                                         struct blkhash_export *e);
/* The last client of e has gone without a way to read the image: its
 * line from the digests the session read, if they cover every block;
 * else no line, and an error saying why.
 */
extern void blkhash_results_session_lost (struct blkhash_export *e);
/* A data write (or zero, or trim) through any export is about to
 * reach the plugin: every line goes (the filter cannot tell which
 * exports share its bytes).  Then its end, once every table has seen
 * it end.
 */
extern void blkhash_results_write_begin (void);
extern void blkhash_results_write_end (void);
/* A flush through e succeeded (t: its passive table, or NULL): record
 * its line before the reply, if the flush may complete it.
 */
extern void blkhash_results_flushed (nbdkit_next *next,
                                     struct blkhash_export *e,
                                     struct blk_table *t);
/* A request through e left t knowing every block: record its line
 * before the reply, from the table.
 */
extern void blkhash_results_complete (struct blkhash_export *e,
                                      struct blk_table *t);
/* nbdkit is exiting: lines of exports still in use, then the file. */
extern void blkhash_results_exit (void);
extern void blkhash_results_free_all (void);

/* plain.c: a plain digest of the whole content (sha256sum's), in
 * order, holes hashed as zeros without reading.
 */
struct blkhash_plain;
/* NULL with nbdkit_error called.  d must outlive it. */
extern struct blkhash_plain *blkhash_plain_new (const struct blk_digest *d,
                                                uint64_t size);
extern void blkhash_plain_free (struct blkhash_plain *p);
/* Bytes hashed so far, from 0. */
extern uint64_t blkhash_plain_pos (const struct blkhash_plain *p);
/* Hash on from where it stopped up to end (capped at the size).  0, or
 * -1 with *err set and nbdkit_error called.
 */
extern int blkhash_plain_advance (nbdkit_next *next, struct blkhash_plain *p,
                                  uint64_t end, int *err);
/* Hash len bytes of buf, or len zeros, at the position (capped at the
 * size).  0, or -1 with *err set and nbdkit_error called.
 */
extern int blkhash_plain_update (struct blkhash_plain *p, const void *buf,
                                 size_t len, int *err);
extern int blkhash_plain_zeros (struct blkhash_plain *p, uint64_t len,
                                int *err);
/* Hash what is left; the digest (d->len bytes) into out (next may
 * be NULL if nothing is).
 */
extern int blkhash_plain_final (nbdkit_next *next, struct blkhash_plain *p,
                                uint8_t *out, int *err);
/* A plain digest following an upload (see plain.c): _written after
 * every write (or zero, or trim) at offset ends, _step after it with
 * how far from 0 the image is written whole (hashing a step of it if
 * no other thread is), _final for the digest (waiting for a step in
 * progress; the run starts over if a write voided it).
 */
struct blkhash_plain_follow;
extern struct blkhash_plain_follow *blkhash_plain_follow_new
  (const struct blk_digest *d, uint64_t size);
extern void blkhash_plain_follow_free (struct blkhash_plain_follow *f);
extern void blkhash_plain_follow_written (struct blkhash_plain_follow *f,
                                          uint64_t offset);
extern void blkhash_plain_follow_step (nbdkit_next *next,
                                       struct blkhash_plain_follow *f,
                                       uint64_t written_to);
extern int blkhash_plain_follow_final (nbdkit_next *next,
                                       struct blkhash_plain_follow *f,
                                       uint8_t *out, int *err);
/* blkhash_plain_final of p, or blkhash_plain_follow_final of f, on a
 * thread of its own while the caller waits: off nbdkit's threads the
 * client that is leaving does not stop it, only nbdkit's exit.
 */
extern int blkhash_plain_final_detached (nbdkit_next *next,
                                         struct blkhash_plain *p,
                                         struct blkhash_plain_follow *f,
                                         uint8_t *out, int *err);
/* The NAME@digest:DIGEST view of one connection (see plain.c). */
struct blkhash_plain_view;
/* NULL with nbdkit_error called (an unknown digest, or no memory);
 * name is the export's, kept; flags and nonce (or NULL) the header's.
 */
extern struct blkhash_plain_view *blkhash_plain_view_new (const char *name,
                                                          const char *digest,
                                                          uint64_t size,
                                                          uint32_t flags,
                                                          const char *nonce);
extern void blkhash_plain_view_free (struct blkhash_plain_view *v);
extern int64_t blkhash_plain_view_size (const struct blkhash_plain_view *v);
extern const char *blkhash_plain_view_digest
  (const struct blkhash_plain_view *v);
extern int blkhash_plain_view_pread (nbdkit_next *next,
                                     struct blkhash_plain_view *v, void *buf,
                                     uint32_t count, uint64_t offset,
                                     int *err);
extern int blkhash_plain_view_cache (nbdkit_next *next,
                                     struct blkhash_plain_view *v,
                                     uint32_t count, uint64_t offset,
                                     int *err);

/* bmap.c: the NAME@bmap view of one connection: mapped ranges and
 * their sha256.  NULL with nbdkit_error called; name is the export's,
 * kept; flags and nonce (or NULL) the header's.
 */
struct blkhash_bmap_view;
extern struct blkhash_bmap_view *blkhash_bmap_view_new (const char *name,
                                                        uint64_t size,
                                                        uint32_t flags,
                                                        const char *nonce);
extern void blkhash_bmap_view_free (struct blkhash_bmap_view *v);
extern int64_t blkhash_bmap_view_size (const struct blkhash_bmap_view *v);
extern int blkhash_bmap_view_pread (nbdkit_next *next,
                                    struct blkhash_bmap_view *v, void *buf,
                                    uint32_t count, uint64_t offset,
                                    int *err);
extern int blkhash_bmap_view_cache (nbdkit_next *next,
                                    struct blkhash_bmap_view *v,
                                    uint32_t count, uint64_t offset,
                                    int *err);

/* readahead.c: a pool of readers that read the next piece of a run
 * while its requester reads and hashes the current one.
 */
#define BLKHASH_MAX_READERS 64
struct blkhash_reader;
/* cpus: online CPUs, for the CPU gate.  0, or -1 (error printed). */
extern int blkhash_readahead_init (unsigned cpus);
extern void blkhash_readahead_fini (void);
extern uint64_t blkhash_now_ns (void);
/* Should this thread pair its next read with a reader? */
extern bool blkhash_readahead_wanted (void);
/* This thread's last plugin read took read_ns. */
extern void blkhash_readahead_note (uint64_t read_ns);
/* This thread's buffer for a reader to fill (BLKHASH_READ_SIZE), or
 * NULL when out of memory.
 */
extern void *blkhash_readahead_buffer (void);
/* A free reader, or NULL (none free: read alone).  Each one taken is
 * given a read with _start, and given back by _finish, which waits for
 * that read and returns its result (-1 with *err set).
 */
extern struct blkhash_reader *blkhash_reader_get (void);
extern void blkhash_reader_start (struct blkhash_reader *rd,
                                  nbdkit_next *next, void *buf,
                                  uint32_t len, uint64_t off);
extern int blkhash_reader_finish (struct blkhash_reader *rd, int *err);

/* hasher.c: block digests computed through the plugin. */
extern int blkhash_hasher_init (void);
extern void blkhash_hasher_fini (void);
extern struct blk_ctx *blkhash_thread_ctx (void);
/* most, or less: the largest read the plugin takes (its block_size
 * maximum, a multiple of its minimum).
 */
extern uint64_t blkhash_read_most (nbdkit_next *next, uint64_t most);
/* Mark the unknown blocks of t that the plugin's extents say read as
 * zeros, reading no data.  0, or -1 with *err set.
 */
extern int blkhash_mark_holes (nbdkit_next *next, struct blk_table *t,
                               int *err);
/* Digests of blocks [first, first+count) into out (NULL: only fill the
 * table), computing and storing those the table does not know.
 */
extern int blkhash_compute (nbdkit_next *next, struct blk_table *t,
                            uint64_t first, uint64_t count, uint8_t *out,
                            int *err);

/* root.c: a table's root, computing what is missing on blkhash_workers
 * threads, and stopping long work.  Should long work stop (nbdkit is
 * exiting, or the client is gone)?  Sets *err and says why.
 */
extern bool blkhash_should_stop (int *err);
/* From now on this thread (one of the filter's own, completing work
 * after the last client left) has the grace a blkhash-file completion
 * has before nbdkit's exit stops it.
 */
extern void blkhash_exit_grace (void);
/* The root.  Stops with ESHUTDOWN when nbdkit exits or the client is
 * gone.
 */
extern int blkhash_compute_root (nbdkit_next *next, struct blk_table *t,
                                 uint8_t *root, int *err);
/* The same on a thread of its own while the caller waits: for work
 * after the client has gone (finalize), which only nbdkit's exit stops,
 * and that only after a grace of 10 seconds.
 */
extern int blkhash_compute_root_detached (nbdkit_next *next,
                                          struct blk_table *t,
                                          uint8_t *root, int *err);

/* Largest share of the root fold done by one request, in digest bytes. */
#define BLKHASH_FOLD_BUDGET (32 * 1024 * 1024)

/* range.c: views of part of an export.  A range next shows the
 * bytes of range of next at 0, read-only, for the hashers.
 */
struct blkhash_range_next {
  struct nbdkit_next_ops ops;   /* first: it is the nbdkit_next */
  nbdkit_next *next;
  uint64_t offset, length;
};
extern void blkhash_range_next_init (struct blkhash_range_next *rn,
                                     nbdkit_next *next,
                                     const struct blk_range *range);
static inline nbdkit_next *
blkhash_range_next (struct blkhash_range_next *rn)
{
  return &rn->ops;
}
/* How many blocks of range (from its first) are blocks of the export
 * of export_size bytes: 0 unless its offset is a multiple of
 * block_size.
 */
extern uint64_t blkhash_range_shared_blocks (const struct blk_range *range,
                                             uint32_t block_size,
                                             uint64_t export_size);
/* Copy to t, the table of a range, the digests of its blocks [first,
 * first+count) below shared that src, the export's table, knows
 * (range block b is src's block src_first+b).  0, or -1 with *err set
 * and nbdkit_error called.
 */
extern int blkhash_range_prefill (struct blk_table *t, struct blk_table *src,
                                  uint64_t src_first, uint64_t shared,
                                  uint64_t first, uint64_t count, int *err);

/* view.c: the read-only NAME@blkhash export.  t may be NULL until the
 * first request needs it.
 */
struct blkhash_view;
/* flags (BLK_VIEW_FLAG_*) and nonce (the view name's, or NULL): the
 * header's.
 */
extern struct blkhash_view *blkhash_view_new (uint64_t size,
                                              const struct blk_params *p,
                                              uint32_t flags,
                                              const char *nonce);
extern void blkhash_view_free (struct blkhash_view *v);
extern int64_t blkhash_view_size (const struct blkhash_view *v);
extern int blkhash_view_pread (nbdkit_next *next, struct blkhash_view *v,
                               struct blk_table *t, void *buf,
                               uint32_t count, uint64_t offset, int *err);
extern int blkhash_view_cache (nbdkit_next *next, struct blkhash_view *v,
                               struct blk_table *t, uint32_t count,
                               uint64_t offset, int *err);
/* r, a view's answer to a request (any view's); when it failed, *err
 * as its client is told it.
 */
extern int blkhash_view_failed (int r, int *err);
/* A range view's blocks [0, shared) are src's from src_first on:
 * copied from there before they are computed (range.c).
 */
extern void blkhash_view_set_source (struct blkhash_view *v,
                                     struct blk_table *src,
                                     uint64_t src_first, uint64_t shared);

/* passive.c: hashing what passes through a data export.  t is the
 * table that keeps passive digests, or NULL when there is none.
 * blkhash_passive_init, once the plugin is known, decides whether
 * written data is hashed, and refuses plugins whose connections do
 * not share one disk (0, or -1 with nbdkit_error called).
 */
extern int blkhash_passive_init (void);
/* Reads and extents feed t and t2 (either may be NULL; t2 the gate's
 * table, of blkhash-expect's digest and block size, when it is not t).
 */
extern int blkhash_passive_pread (nbdkit_next *next,
                                  struct blkhash_export *e,
                                  struct blk_table *t, struct blk_table *t2,
                                  void *buf, uint32_t count, uint64_t offset,
                                  uint32_t flags, int *err);
extern int blkhash_passive_extents (nbdkit_next *next,
                                    struct blkhash_export *e,
                                    struct blk_table *t, struct blk_table *t2,
                                    uint32_t count, uint64_t offset,
                                    uint32_t flags,
                                    struct nbdkit_extents *extents,
                                    int *err);
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

/* ranges.c: a set of byte ranges for the gate (see ranges.c): add
 * [a, b); when full, merge the closest ranges if may_merge (then
 * merged is set), else drop it and return false.
 */
#define BLKHASH_RANGES_MAX 65536
struct blkhash_range { uint64_t a, b; };
struct blkhash_ranges {
  struct blkhash_range *v;
  size_t n, cap;
  bool merged;                  /* holds gaps that were never added */
};
extern bool blkhash_ranges_add (struct blkhash_ranges *r, uint64_t a,
                                uint64_t b, bool may_merge);
/* Is [a, b) in one range? */
extern bool blkhash_ranges_covers (const struct blkhash_ranges *r,
                                   uint64_t a, uint64_t b);
/* The end of the range holding a, or a if none does. */
extern uint64_t blkhash_ranges_end_at (const struct blkhash_ranges *r,
                                       uint64_t a);
/* a if a range holds it, else the start of the next (UINT64_MAX). */
extern uint64_t blkhash_ranges_next (const struct blkhash_ranges *r,
                                     uint64_t a);
extern void blkhash_ranges_clear (struct blkhash_ranges *r);
extern void blkhash_ranges_free (struct blkhash_ranges *r);

/* sent.c: what an import was sent, the record the gate judges it by
 * (see sent.c; record.c makes, frees and counts readers in and out of
 * it).  _new: NULL with *err set and nbdkit_error called;
 * name must outlive it.  A reader _enters before its plugin read and
 * ends with _read (its data: checked, recorded, and for a plain digest
 * hashed in its turn) or _leave (the read failed); _zero records zeros
 * a client learned from extents.  Both fail (-1, *err EIO) what cannot
 * be verified, and set *complete once every byte was sent.  _final:
 * the value of what was sent, once complete.
 */
struct blkhash_sent;
extern struct blkhash_sent *blkhash_sent_new (const char *name,
                                              uint64_t size, int *err);
extern void blkhash_sent_free (struct blkhash_sent *s);
extern void blkhash_sent_enter (struct blkhash_sent *s);
extern void blkhash_sent_leave (struct blkhash_sent *s);
extern int blkhash_sent_read (nbdkit_next *next, struct blkhash_sent *s,
                              const void *buf, uint64_t offset,
                              uint32_t count, bool *complete, int *err);
extern int blkhash_sent_zero (nbdkit_next *next, struct blkhash_sent *s,
                              uint64_t offset, uint64_t count,
                              bool *complete, int *err);
extern int blkhash_sent_final (struct blkhash_sent *s, uint8_t *out,
                               int *err);
/* Bytes sent, or known zero, so far. */
extern uint64_t blkhash_sent_bytes (struct blkhash_sent *s);

/* expectvalue.c: the value of blkhash-expect= (and -at), once
 * parsed; NULL when there is none.  _config takes blkhash-expect and
 * blkhash-expect-at; _ready parses the value once the default
 * parameters are known.  0, or -1 with nbdkit_error called.
 */
struct blkhash_expected {
  bool plain;                           /* ALG:HEX, else blkhash */
  struct blk_digest digest;             /* plain: ALG */
  const struct blk_params *params;      /* blkhash: its parameters */
  uint8_t want[BLK_DIGEST_MAX];
  size_t len;
  char tag[BLK_DIGEST_NAME_MAX + 32];   /* "sha256", "blkhash-sha1/1M" */
  bool every_flush;                     /* blkhash-expect-at=flush */
  /* An import's record (sent.c): the granules it checks, and how
   * much it keeps in a file (blkhash-expect-spill).
   */
  const struct blk_params *sent_params;
  uint64_t spill;
};
/* blkhash-expect-spill's default. */
#define BLKHASH_EXPECT_SPILL (UINT64_C (4) << 30)
/* The granules of a plain digest's record. */
#define BLKHASH_SENT_PLAIN_GRANULE (256 * 1024)
extern const struct blkhash_expected *blkhash_expected;
/* Takes blkhash-expect, blkhash-expect-at and blkhash-expect-spill. */
extern int blkhash_expect_config (const char *key, const char *value);
extern int blkhash_expect_ready (void);
/* Should data exports hash passively for the gate (a blkhash value of
 * the default digest and block size)?
 */
extern bool blkhash_expect_passive (void);
extern void blkhash_expect_value_free (void);

/* expect.c and expectimport.c (imports): the gate (see the notes at
 * the top of each).
 */
/* A data write (or zero, or trim) through e, around the plugin call:
 * begin voids every verdict (0, or -1 with *err set: out of memory);
 * end records the range as written if ok.
 */
extern int blkhash_expect_write_begin (struct blkhash_export *e, int *err);
extern void blkhash_expect_write_end (struct blkhash_export *e,
                                      uint64_t offset, uint64_t count,
                                      bool ok);
/* After write_end: a plain digest hashes on through what is written
 * whole, on this thread if it is its turn.
 */
extern void blkhash_expect_follow (nbdkit_next *next,
                                   struct blkhash_export *e);
/* A flush through e succeeded at the plugin: judge the upload.  0, or
 * -1 with *err set (EIO: a complete image does not match).
 */
extern int blkhash_expect_flush (nbdkit_next *next,
                                 struct blkhash_export *e, int *err);
/* The last client of e has gone (next NULL: it cannot read): judge it
 * if written since its last verdict, log a mismatch not yet logged,
 * and a session that read in part and was not judged.
 */
extern void blkhash_expect_session_end (nbdkit_next *next,
                                        struct blkhash_export *e);
/* A read (is_read) or extents request through e, around the plugin
 * call: _begin fails a read of content judged not to match (EIO);
 * _end (buf or exts NULL: the request failed) counts what the client
 * was given, judges the import if that completed it, and fails the
 * request on a mismatch.  0, or -1 with *err set.
 */
struct blkhash_gate;
struct blkhash_rsent;
struct blkhash_expect_io {
  struct blkhash_gate *g;       /* NULL: no gate */
  uint64_t gen;                 /* the content when it began */
  struct blkhash_rsent *rs;     /* its record, if it is the content's */
};
extern int blkhash_expect_read_begin (struct blkhash_export *e,
                                      struct blkhash_expect_io *io,
                                      bool is_read, int *err);
extern int blkhash_expect_read_end (nbdkit_next *next,
                                    struct blkhash_export *e,
                                    struct blkhash_expect_io *io,
                                    const void *buf, uint32_t count,
                                    uint64_t offset, int *err);
extern int blkhash_expect_extents_end (nbdkit_next *next,
                                       struct blkhash_export *e,
                                       struct blkhash_expect_io *io,
                                       struct nbdkit_extents *exts,
                                       uint32_t count, uint64_t offset,
                                       uint32_t flags, int *err);
/* A client connects to data export e (at prepare): refused (-1,
 * logged) if the export's other connections have another size, or if
 * it is empty (which no request completes: judged now) and does not
 * match.  _disconnect: it went, after its session's end.
 */
extern int blkhash_expect_connect (struct blkhash_export *e);
extern void blkhash_expect_disconnect (struct blkhash_export *e);
/* May export name's blkhash-file line hold its checksum root (default
 * parameters)?  false: the content is not known to match, the line
 * holds zeros.
 */
extern bool blkhash_expect_vouches (const char *name, const uint8_t *root);
/* Has the gate passed export name's upload as it is now? */
extern bool blkhash_expect_passed (const char *name);
extern void blkhash_expect_exit (void);
extern void blkhash_expect_free_all (void);

#endif /* NBDKIT_BLKHASH_FILTER_H */
