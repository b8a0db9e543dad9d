/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash filter: its parameters and its lifetime (load,
 * config, get_ready, cleanup, unload), and the configuration the
 * other files read (filter.h).  blkhash.c holds the callbacks of
 * connections and requests.
 */
#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "filter.h"
#include "minmax.h"

/* nbdkit -D blkhash.stats=1 */
NBDKIT_DLL_PUBLIC int blkhash_debug_stats;

struct blkhash_stats blkhash_stats;
const struct blk_params *blkhash_default_params;
const char *blkhash_file;
const char *blkhash_file_name = "-";
bool blkhash_cache;
unsigned blkhash_workers;
enum blkhash_readahead blkhash_readahead = BLKHASH_READAHEAD_AUTO;
bool blkhash_plugin_parallel;
bool blkhash_views_only;

static const char *digest_name = BLK_DEFAULT_DIGEST;
static uint64_t block_size = BLK_DEFAULT_BLOCK_SIZE;

void
blkhash_load (void)
{
  const long cpus = MAX (sysconf (_SC_NPROCESSORS_ONLN), 1L);

  blkhash_order_loaded ();
  if (blkhash_hasher_init () == -1 || blkhash_readahead_init (cpus) == -1)
    exit (EXIT_FAILURE);
  blkhash_exports_init ();
  blkhash_workers = MIN (cpus, (long) BLKHASH_MAX_WORKERS);
}

void
blkhash_unload (void)
{
  blkhash_exports_free_all ();
  blkhash_results_free_all ();
  blkhash_expect_free_all ();
  blkhash_expect_value_free ();
  blkhash_params_free_all ();
  blkhash_readahead_fini ();
  blkhash_hasher_fini ();
  free ((char *) blkhash_file);
}

/* key=value, a boolean as nbdkit reads them, into *b. */
static int
config_bool (const char *key, const char *value, bool *b)
{
  const int r = nbdkit_parse_bool (value);

  if (r == -1) {
    blkhash_error ("%s=%s: expected true or false", key, value);
    return -1;
  }
  *b = r;
  return 0;
}

int
blkhash_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
                const char *key, const char *value)
{
  if (strcmp (key, "blkhash-digest") == 0) {
    digest_name = value;
    return 0;
  }
  else if (strcmp (key, "blkhash-block-size") == 0) {
    int64_t r = nbdkit_parse_size (value);
    if (r == -1) {
      blkhash_error ("blkhash-block-size=%s: not a size", value);
      return -1;
    }
    block_size = r;
    return 0;
  }
  else if (strcmp (key, "blkhash-file") == 0) {
    free ((char *) blkhash_file);       /* the last one given wins */
    blkhash_file = nbdkit_absolute_path (value);
    return blkhash_file ? 0 : -1;
  }
  else if (strcmp (key, "blkhash-workers") == 0) {
    if (nbdkit_parse_unsigned ("blkhash-workers", value,
                               &blkhash_workers) == -1)
      return -1;
    if (blkhash_workers < 1 || blkhash_workers > BLKHASH_MAX_WORKERS) {
      blkhash_error ("blkhash-workers=%s: must be 1 to %d", value,
                     BLKHASH_MAX_WORKERS);
      return -1;
    }
    return 0;
  }
  else if (strcmp (key, "blkhash-readahead") == 0) {
    if (strcmp (value, "auto") == 0)
      blkhash_readahead = BLKHASH_READAHEAD_AUTO;
    else {
      int r = nbdkit_parse_bool (value);
      if (r == -1) {
        blkhash_error ("blkhash-readahead=%s: expected auto, true or false",
                       value);
        return -1;
      }
      blkhash_readahead = r ? BLKHASH_READAHEAD_ON : BLKHASH_READAHEAD_OFF;
    }
    return 0;
  }
  else if (strcmp (key, "blkhash-file-name") == 0) {
    if (value[0] == '\0') {
      blkhash_error ("blkhash-file-name: the name must not be empty");
      return -1;
    }
    blkhash_file_name = value;
    return 0;
  }
  else if (strcmp (key, "blkhash-expect") == 0 ||
           strcmp (key, "blkhash-expect-at") == 0 ||
           strcmp (key, "blkhash-expect-spill") == 0)
    return blkhash_expect_config (key, value);
  else if (strcmp (key, "blkhash-views-only") == 0)
    return config_bool (key, value, &blkhash_views_only);
  else if (strcmp (key, "blkhash-max-size") == 0)
    return blkhash_max_size_config (value);
  else if (strcmp (key, "blkhash-cache") == 0)
    return config_bool (key, value, &blkhash_cache);
  return next (nxdata, key, value);
}

int
blkhash_config_complete (nbdkit_next_config_complete *next,
                         nbdkit_backend *nxdata)
{
  blkhash_default_params = blkhash_params_get (NULL, digest_name,
                                               block_size);
  if (blkhash_default_params == NULL)
    return -1;

  if (blkhash_expect_ready () == -1)
    return -1;
  if (blkhash_expected && blkhash_views_only)
    blkhash_error ("blkhash: blkhash-expect with blkhash-views-only=true: no "
                   "client can read or write a data export, so nothing is "
                   "ever judged");
  if (blkhash_order_check () == -1)
    return -1;
  if (blkhash_passive_init () == -1)
    return -1;
  if (blkhash_file && blkhash_results_open (blkhash_file) == -1)
    return -1;
  return next (nxdata);
}

const char blkhash_config_help[] =
  "blkhash-digest=<NAME>      Digest: OpenSSL's, or blake3 if built with\n"
  "                           libblake3 (default sha256).\n"
  "blkhash-block-size=<SIZE>  Block size, a multiple of 4K from 4K to 16M\n"
  "                           (default 64K).\n"
  "blkhash-file=<PATH>        Write checksum lines as they become known.\n"
  "blkhash-file-name=<NAME>   The default export's NAME there (default -).\n"
  "blkhash-cache=<BOOL>       Keep digests between clients: only if no\n"
  "                           one else writes the image (default false).\n"
  "blkhash-workers=<N>        Threads for a root that needs everything\n"
  "                           (default: online CPUs).\n"
  "blkhash-readahead=auto|<BOOL>\n"
  "                           Two reads in flight per request: auto\n"
  "                           on slow storage with idle CPUs (default).\n"
  "blkhash-max-size=<SIZE>    The largest export hashed (default 1P, 1T\n"
  "                           for plain digests; 0: no limit).\n"
  "blkhash-views-only=<BOOL>  Serve the views, refuse the data exports\n"
  "                           (default false).\n"
  "blkhash-expect=<VALUE>     Fail the flush of an upload, or the read\n"
  "                           completing an import, that does not match:\n"
  "                           ALG:HEX (sha256, sha512, sha1, md5),\n"
  "                           blkhash-DIGEST/BLOCKSIZE:HEX or blkhash:HEX.\n"
  "blkhash-expect-at=<WHEN>   complete: fail flushes once the image is\n"
  "                           all written (default); flush: any flush.\n"
  "blkhash-expect-spill=<SIZE>\n"
  "                           An import's data read ahead or in part\n"
  "                           kept in TMPDIR past 64M (default 4G).";

void
blkhash_cleanup (nbdkit_backend *backend)
{
  blkhash_expect_exit ();
  blkhash_results_exit ();
}

#ifdef HAVE_STRUCT_NBDKIT_FILTER_DUMP_PLUGIN
/* nbdkit null --filter=blkhash --dump-plugin, where nbdkit calls it
 * for filters (1.42 does, 1.32 does not).
 */
void
blkhash_dump_plugin (void)
{
  printf ("blkhash_version=%s\n", PACKAGE_VERSION);
  printf ("blkhash_default_digest=%s\n", BLK_DEFAULT_DIGEST);
  printf ("blkhash_default_block_size=%u\n", BLK_DEFAULT_BLOCK_SIZE);
  printf ("blkhash_openssl=%s\n", OpenSSL_version (OPENSSL_VERSION));
  printf ("blkhash_blake3=%s\n", blk_digest_have_blake3 () ? "yes" : "no");
}
#endif

/* Our own threads call the plugin at once only if it allows parallel
 * requests: nbdkit serialises requests for the others, not calls.
 */
int
blkhash_get_ready (int thread_model)
{
  blkhash_plugin_parallel = thread_model == NBDKIT_THREAD_MODEL_PARALLEL;
  if (thread_model != NBDKIT_THREAD_MODEL_PARALLEL && blkhash_workers > 1) {
    nbdkit_debug ("blkhash: the plugin does not take parallel requests: "
                  "one thread per root computation");
    blkhash_workers = 1;
  }
  return 0;
}

/* Once per export when its last client leaves, not per connection:
 * the counters are for the whole server.
 */
void
blkhash_log_stats (struct blkhash_export *e)
{
  if (blkhash_debug_stats)
    blkhash_debug ("blkhash: stats: passive %" PRIu64 " blocks, computed %"
                   PRIu64 " blocks reading %" PRIu64 " bytes, holes %"
                   PRIu64 " blocks, read ahead %" PRIu64 " pieces "
                   "(since start; the last client of '%s' left)",
                   blkhash_stats.passive_blocks, blkhash_stats.computed_blocks,
                   blkhash_stats.read_bytes, blkhash_stats.hole_blocks,
                   blkhash_stats.paired_reads,
                   blkhash_export_name (e));
}
