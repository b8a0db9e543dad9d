/* nbdsum: print or check blkhash checksums of disk images. */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nbdsum.h"
#include "sumline.h"
#include "util.h"

const char *progname = "nbdsum";

static const int stop_signals[] = { SIGHUP, SIGINT, SIGPIPE, SIGTERM };
static sigset_t handled;                /* those of them we handle */
static volatile sig_atomic_t caught;
static int stop_pipe[2] = { -1, -1 };

static void
on_stop_signal (int sig)
{
  const int saved_errno = errno;

  if (caught == 0) {
    caught = sig;
    /* Non-blocking, and only the first byte matters. */
    ssize_t r = write (stop_pipe[1], "", 1);
    (void) r;
  }
  else if (sig != SIGPIPE) {
    /* Asked twice: end now, as if nbdsum had no handler.  (SIGPIPE
     * comes again with every write to a closed pipe.)
     */
    struct sigaction sa = { .sa_handler = SIG_DFL };
    sigemptyset (&sa.sa_mask);
    sigaction (sig, &sa, NULL);
    raise (sig);
  }
  errno = saved_errno;
}

static void
catch_stop_signals (void)
{
  struct sigaction sa = { .sa_handler = on_stop_signal };

  if (pipe2 (stop_pipe, O_CLOEXEC | O_NONBLOCK) == -1) {
    fprintf (stderr, "%s: pipe2: %m\n", progname);
    exit (EXIT_FAILURE);
  }
  /* No SA_RESTART: a read from a terminal or a pipe must end too.
   * One handler at a time: a second signal is one too many.
   */
  sigemptyset (&sa.sa_mask);
  for (size_t i = 0; i < sizeof stop_signals / sizeof stop_signals[0]; i++)
    sigaddset (&sa.sa_mask, stop_signals[i]);
  sigemptyset (&handled);
  for (size_t i = 0; i < sizeof stop_signals / sizeof stop_signals[0]; i++) {
    struct sigaction old;

    /* Left ignored, as nohup and shells' background jobs expect. */
    if (sigaction (stop_signals[i], NULL, &old) == 0 &&
        old.sa_handler == SIG_IGN)
      continue;
    if (sigaction (stop_signals[i], &sa, NULL) == 0)
      sigaddset (&handled, stop_signals[i]);
  }
}

int
stop_signal (void)
{
  return caught;
}

int
stop_fd (void)
{
  return stop_pipe[0];
}

void
stop_signals_block (sigset_t *saved)
{
  pthread_sigmask (SIG_BLOCK, &handled, saved);
}

void
stop_signals_restore (const sigset_t *saved)
{
  pthread_sigmask (SIG_SETMASK, saved, NULL);
}

void
stop_signals_default (void)
{
  for (size_t i = 0; i < sizeof stop_signals / sizeof stop_signals[0]; i++)
    if (sigismember (&handled, stop_signals[i]))
      signal (stop_signals[i], SIG_DFL);
}

/* Everything is closed and cleaned up: end as the signal would have
 * ended us, so that shells and callers see it (and say nothing about
 * SIGPIPE).
 */
static void __attribute__ ((noreturn))
die_of_signal (int sig)
{
  sigset_t set;

  signal (sig, SIG_DFL);
  sigemptyset (&set);
  sigaddset (&set, sig);
  pthread_sigmask (SIG_UNBLOCK, &set, NULL);
  raise (sig);
  _exit (128 + sig);
}

void
error_at (const char *name, const char *fmt, ...)
{
  va_list ap;

  fprintf (stderr, "%s: %s: ", progname, name);
  va_start (ap, fmt);
  vfprintf (stderr, fmt, ap);
  va_end (ap);
  fputc ('\n', stderr);
}

int
checksum_one (const char *name, struct result *res)
{
  uint8_t root[EVP_MAX_MD_SIZE];
  const double start = now ();
  struct endpoint *ep;

  memset (res, 0, sizeof *res);
  res->name = name;
  if (strcmp (name, "-") == 0) {
    struct blk_params p;
    if (stream_checksum (name, STDIN_FILENO, root, &res->size, &p) == -1)
      return -1;
    blk_hex (root, p.digest.len, res->hex);
    snprintf (res->digest, sizeof res->digest, "%s", p.digest.name);
    res->block_size = p.block_size;
    res->method = "stream";
    blk_params_free (&p);
  }
  else {
    if ((ep = endpoint_open (name)) == NULL)
      return -1;
    if (ep->ops->checksum (ep, root) == -1) {
      endpoint_close (ep);
      return -1;
    }
    blk_hex (root, ep->params->digest.len, res->hex);
    snprintf (res->digest, sizeof res->digest, "%s", ep->params->digest.name);
    res->block_size = ep->params->block_size;
    res->size = ep->size;
    res->method = ep->ops->name;
    endpoint_close (ep);
  }
  res->seconds = now () - start;
  return 0;
}

static void
json_string (const char *s)
{
  putchar ('"');
  for (; *s; s++) {
    const unsigned char c = *s;
    if (c == '"' || c == '\\')
      printf ("\\%c", c);
    else if (c < 0x20)
      printf ("\\u%04x", c);
    else
      putchar (c);
  }
  putchar ('"');
}

/* Print res as 'HEX  NAME' or, with --json, as a JSON object. */
static void
print_result (const struct result *res)
{
  if (opts.json) {
    fputs ("{\"name\": ", stdout);
    json_string (res->name);
    printf (", \"checksum\": \"%s\", \"digest\": ", res->hex);
    json_string (res->digest);
    printf (", \"block_size\": %" PRIu32 ", \"size\": %" PRIu64
            ", \"method\": \"%s\", \"seconds\": %.3f}\n",
            res->block_size, res->size, res->method, res->seconds);
  }
  else
    blk_fput_sum_line (stdout, res->hex, res->name);
  fflush (stdout);
}

/* Refuse views among the inputs before anything is hashed (inputs in
 * --check files are refused as their lines come).
 */
static bool
any_view (char **names, int n)
{
  bool found = false;

  for (int i = 0; i < n; i++)
    if (refuse_view (names[i]))
      found = true;
  return found;
}

int
main (int argc, char **argv)
{
  int first, i, status = EXIT_SUCCESS;

  /* Request buffers are reused instead of mapped and faulted in anew. */
  mallopt (M_MMAP_THRESHOLD, 64 * 1024 * 1024);

  parse_options (argc, argv, &first);
  catch_stop_signals ();
  if (opts.check)
    status = check_files (&argv[first], argc - first);
  else if (any_view (&argv[first], argc - first))
    status = opts.diff ? 2 : EXIT_FAILURE;
  else if (opts.diff)
    status = diff_images (argv[first], argv[first + 1]);
  else if (opts.blocks)
    status = print_blocks (argv[first]);
  else {
    for (i = first; i < argc && !stop_signal (); i++) {
      struct result res;
      if (checksum_one (argv[i], &res) == -1)
        status = EXIT_FAILURE;
      /* A signal may have come after the last request. */
      else if (!stop_signal ())
        print_result (&res);
    }
  }
  if (stop_signal ())
    die_of_signal (stop_signal ());
  if (fflush (stdout) == EOF || ferror (stdout)) {
    perror ("nbdsum: stdout");
    status = EXIT_FAILURE;
  }
  return status;
}
