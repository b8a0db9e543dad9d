/* nbdkit-blkhash filter: digest and block size combinations. */
#include <config.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "blkhash.h"

struct params_entry {
  struct blk_params p;
  struct params_entry *next;
};

static pthread_mutex_t params_lock = PTHREAD_MUTEX_INITIALIZER;
static struct params_entry *params_list;

const struct blk_params *
blkhash_params_get (const char *digest, uint64_t block_size)
{
  struct params_entry *e;
  const char *msg;

  pthread_mutex_lock (&params_lock);
  for (e = params_list; e; e = e->next)
    if (e->p.block_size == block_size &&
        strcasecmp (e->p.digest.name, digest) == 0)
      break;
  if (e == NULL && (e = calloc (1, sizeof *e)) != NULL) {
    if ((msg = blk_params_init (&e->p, digest, block_size)) != NULL) {
      nbdkit_error ("blkhash: digest '%s' with block size %" PRIu64 ": %s",
                    digest, block_size, msg);
      free (e);
      e = NULL;
    }
    else {
      e->next = params_list;
      params_list = e;
    }
  }
  else if (e == NULL)
    nbdkit_error ("calloc: %m");
  pthread_mutex_unlock (&params_lock);
  return e ? &e->p : NULL;
}

void
blkhash_params_free_all (void)
{
  struct params_entry *e, *next;

  for (e = params_list; e; e = next) {
    next = e->next;
    blk_params_free (&e->p);
    free (e);
  }
  params_list = NULL;
}
