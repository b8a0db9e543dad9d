/* nbdsum: progress on standard error (a bar on a terminal) or as
 * "N/100" lines on a file descriptor, like nbdcopy.
 */
#ifndef NBDSUM_PROGRESS_H
#define NBDSUM_PROGRESS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct progress {
  const char *name;
  uint64_t total;               /* image bytes */
  atomic_uint_fast64_t done;    /* added to by the connections' threads */
  double start;
  int last_percent;
};

/* Seconds on the monotonic clock. */
extern double now (void);
extern void progress_init (struct progress *p, const char *name,
                           uint64_t total);
/* Report p, at the end when final is true. */
extern void progress_update (struct progress *p, bool final);

#endif /* NBDSUM_PROGRESS_H */
