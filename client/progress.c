/* nbdsum: progress on standard error (a bar on a terminal) or as
 * "N/100" lines on a file descriptor, like nbdcopy.
 */
#include <config.h>

#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "options.h"
#include "progress.h"
#include "signals.h"

double
now (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

void
progress_init (struct progress *p, const char *name, uint64_t total)
{
  p->name = name;
  p->total = total;
  atomic_store (&p->done, 0);
  p->start = now ();
  p->last_percent = -1;
}

static const char *
human (double bytes, char *buf, size_t len)
{
  static const char *units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
  int u = 0;

  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    u++;
  }
  snprintf (buf, len, "%.1f %s", bytes, units[u]);
  return buf;
}

void
progress_update (struct progress *p, bool final)
{
  const uint64_t done = atomic_load (&p->done);
  int percent;

  /* After a signal, not a word more: that pipe may be what broke. */
  if ((!opts->progress_bar && opts->progress_fd < 0) || stop_signal ())
    return;
  percent = final || p->total == 0 ? 100
    : (int) (done >= p->total ? 100 : done * 100 / p->total);

  if (opts->progress_fd >= 0 && percent != p->last_percent)
    dprintf (opts->progress_fd, "%d/100\n", percent);

  if (opts->progress_bar) {
    const double elapsed = now () - p->start;
    const double rate = elapsed > 0 ? done / elapsed : 0;
    const int width = 30, filled = percent * width / 100;
    char rbuf[32], bar[64];
    int i;

    for (i = 0; i < width; i++)
      bar[i] = i < filled ? '#' : '.';
    bar[width] = '\0';
    fprintf (stderr, "\r[%s] %3d%% %s/s", bar, percent,
             human (rate, rbuf, sizeof rbuf));
    if (!final && rate > 0 && done < p->total) {
      const unsigned eta = (p->total - done) / rate;
      fprintf (stderr, " ETA %u:%02u:%02u ", eta / 3600, eta / 60 % 60,
               eta % 60);
    }
    else
      fputs ("              ", stderr);
    if (final)
      fputc ('\n', stderr);
    fflush (stderr);
  }
  p->last_percent = percent;
}
