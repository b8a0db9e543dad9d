/* nbdsum: --diff (where do two images differ?) and --blocks (the
 * per-block manifest).  Both compare or print block digests; through
 * blkhash views only digests cross the network.
 */
#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checksum.h"
#include "cleanup.h"
#include "diff.h"
#include "endpoint.h"
#include "messages.h"
#include "options.h"
#include "signals.h"
#include "util.h"

/* Blocks compared or printed per round of digest reads. */
#define WINDOW 65536

/* Open name and hash it, for its block digests. */
static struct endpoint *
open_hashed (const char *name, const struct hash_spec *spec)
{
  struct endpoint *ep = input_open (name, spec);
  uint8_t root[EVP_MAX_MD_SIZE];

  if (ep && ep->ops->checksum (ep, root) == -1) {
    input_close (ep);
    return NULL;
  }
  return ep;
}

struct runs {
  uint64_t start, end;          /* current run, empty if equal */
  uint64_t bytes, count;
};

static void
flush_run (struct runs *r)
{
  if (r->end == r->start)
    return;
  if (opts->json)
    printf ("{\"offset\": %" PRIu64 ", \"length\": %" PRIu64 "}\n",
            r->start, r->end - r->start);
  else
    printf ("%" PRIu64 " %" PRIu64 "\n", r->start, r->end - r->start);
  r->bytes += r->end - r->start;
  r->count++;
  r->start = r->end;
}

static void
add_range (struct runs *r, uint64_t start, uint64_t end)
{
  if (start != r->end)
    flush_run (r);
  if (r->end == r->start)
    r->start = start;
  r->end = end;
}

int
diff_images (const char *a, const char *b, const struct hash_spec *spec)
{
  struct hash_spec spec_b;
  struct endpoint *ea = NULL, *eb = NULL;
  CLEANUP_FREE uint8_t *da = NULL, *db = NULL;
  struct runs runs = { 0 };
  uint64_t common, bs, max_size;
  size_t L;
  int status = 2;

  if ((ea = open_hashed (a, spec)) == NULL)
    goto out;
  /* B must be hashed the same way as A (whatever A's server chose). */
  spec_b = (struct hash_spec) {
    spec->digest ? spec->digest : ea->params->digest.name,
    spec->block_size ? spec->block_size : ea->params->block_size,
  };
  if ((eb = open_hashed (b, &spec_b)) == NULL)
    goto out;
  if (ea->params->digest.len != eb->params->digest.len ||
      ea->params->block_size != eb->params->block_size) {
    fprintf (stderr, "%s: %s and %s were hashed differently\n",
             progname, a, b);
    goto out;
  }

  L = ea->params->digest.len;
  bs = ea->params->block_size;
  common = MIN (ea->nblocks, eb->nblocks);
  max_size = MAX (ea->size, eb->size);
  da = malloc (WINDOW * L);
  db = malloc (WINDOW * L);
  if (da == NULL || db == NULL) {
    fprintf (stderr, "%s: out of memory\n", progname);
    goto out;
  }
  for (uint64_t w = 0; w < common; w += WINDOW) {
    const uint64_t n = MIN (common - w, (uint64_t) WINDOW);
    if (stop_signal () || ea->ops->digests (ea, w, n, da) == -1 ||
        eb->ops->digests (eb, w, n, db) == -1)
      goto out;
    for (uint64_t i = 0; i < n; i++) {
      if (memcmp (da + i * L, db + i * L, L) != 0) {
        const uint64_t start = (w + i) * bs;
        add_range (&runs, start, MIN (start + bs, max_size));
      }
    }
  }
  /* Whatever only the larger image has differs. */
  if (ea->size != eb->size) {
    add_range (&runs, MAX (runs.end, MIN (ea->size, eb->size)), max_size);
  }
  flush_run (&runs);
  if (stop_signal ())
    goto out;
  if (runs.count)
    fprintf (stderr, "%s: %s and %s differ in %" PRIu64 " bytes "
             "(%" PRIu64 " range%s, compared in %" PRIu64 " byte blocks)\n",
             progname, a, b, runs.bytes, runs.count,
             runs.count == 1 ? "" : "s", bs);
  status = runs.count ? 1 : 0;

 out:
  input_close (ea);
  input_close (eb);
  return status;
}

static void
print_block_line (uint64_t offset, uint64_t length, const char *hex)
{
  if (opts->json && hex)
    printf ("{\"offset\": %" PRIu64 ", \"length\": %" PRIu64
            ", \"digest\": \"%s\"}\n", offset, length, hex);
  else if (opts->json)
    printf ("{\"offset\": %" PRIu64 ", \"length\": %" PRIu64
            ", \"zero\": true}\n", offset, length);
  else
    printf ("%" PRIu64 " %" PRIu64 " %s\n", offset, length,
            hex ? hex : "zero");
}

int
print_blocks (const char *name, const struct hash_spec *spec)
{
  struct endpoint *ep = open_hashed (name, spec);
  CLEANUP_FREE uint8_t *d = NULL;
  char hex[2 * EVP_MAX_MD_SIZE + 1];
  uint64_t zero_start = 0, zero_len = 0;
  int status = EXIT_FAILURE;

  if (ep == NULL)
    return EXIT_FAILURE;
  if ((d = malloc (WINDOW * ep->params->digest.len)) == NULL) {
    error_at (name, "out of memory");
    goto out;
  }
  if (!opts->json)
    printf ("# %s %" PRIu32 " %" PRIu64 "\n", ep->params->digest.name,
            ep->params->block_size, ep->size);
  for (uint64_t w = 0; w < ep->nblocks; w += WINDOW) {
    const uint64_t n = MIN (ep->nblocks - w, (uint64_t) WINDOW);
    if (ep->ops->digests (ep, w, n, d) == -1)
      goto out;
    for (uint64_t i = 0; i < n; i++) {
      /* Stop at a signal (SIGPIPE from "| head"), or when standard
       * output fails with SIGPIPE ignored.
       */
      if (stop_signal () || ferror (stdout))
        goto out;
      const uint64_t b = w + i, off = b * ep->params->block_size;
      const uint32_t len = blk_block_len (ep->size, ep->params->block_size, b);
      const uint8_t *digest = d + i * ep->params->digest.len;
      /* Runs of full zero blocks make one line. */
      if (len == ep->params->block_size &&
          memcmp (digest, ep->params->zero_digest,
                  ep->params->digest.len) == 0) {
        if (zero_len == 0)
          zero_start = off;
        zero_len += len;
        continue;
      }
      if (zero_len)
        print_block_line (zero_start, zero_len, NULL);
      zero_len = 0;
      blk_hex (digest, ep->params->digest.len, hex);
      print_block_line (off, len, hex);
    }
  }
  if (zero_len)
    print_block_line (zero_start, zero_len, NULL);
  status = EXIT_SUCCESS;
 out:
  input_close (ep);
  return status;
}
