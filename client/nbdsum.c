/* nbdsum: print or check blkhash checksums of disk images.
 *
 * One run: main parses the options, then checksum_one (checksum.c)
 * hashes each input: input_open picks the method (serverside.c, else
 * clientside.c), whose checksum runs endpoint_run (endpoint.c), one
 * poll loop per connection.  This file only prints the results.
 */
#include <config.h>

#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "checksum.h"
#include "diff.h"
#include "endpoint.h"
#include "options.h"
#include "signals.h"
#include "source.h"
#include "sumline.h"

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

/* A checksum line says how to verify it: tagged with its digest and
 * block size unless they are the defaults (or as --tag, --untagged).
 */
static void
print_sum_line (const struct result *res)
{
  unsigned flags = opts->zero ? BLK_SUM_ZERO : 0;

  if (opts->tag == TAG_ALWAYS ||
      (opts->tag == TAG_AUTO &&
       blk_sum_needs_tag (res->digest, res->block_size)))
    flags |= BLK_SUM_TAGGED;
  blk_fput_sum_line (stdout, flags, res->digest, res->block_size, res->hex,
                     res->name);
}

/* Print res as a checksum line or, with --json, as a JSON object. */
static void
print_result (const struct result *res)
{
  if (opts->json) {
    fputs ("{\"name\": ", stdout);
    json_string (res->name);
    printf (", \"checksum\": \"%s\", \"digest\": ", res->hex);
    json_string (res->digest);
    printf (", \"block_size\": %" PRIu32 ", \"size\": %" PRIu64
            ", \"method\": \"%s\", \"seconds\": %.3f}\n",
            res->block_size, res->size, res->method, res->seconds);
  }
  else
    print_sum_line (res);
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
  int first, i, nargs, status = EXIT_SUCCESS;
  char *stdin_only[] = { (char *) "-" };
  char **args;

  /* Request buffers (never more than a span) are reused instead of
   * mapped and faulted in anew.
   */
  mallopt (M_MMAP_THRESHOLD, SPAN_BYTES);

  parse_options (argc, argv, &first);
  catch_stop_signals ();

  /* Inputs are hashed as the options say (--diff: B as A was). */
  const struct hash_spec spec = { opts->digest, opts->block_size };

  /* No input: standard input, as sha256sum does. */
  args = &argv[first];
  nargs = argc - first;
  if (nargs == 0) {
    args = stdin_only;
    nargs = 1;
  }
  if (opts->check)
    status = check_files (args, nargs, &spec);
  else if (any_view (args, nargs))
    status = opts->diff ? 2 : EXIT_FAILURE;
  else if (opts->diff)
    status = diff_images (args[0], args[1], &spec);
  else if (opts->blocks)
    status = print_blocks (args[0], &spec);
  else {
    for (i = 0; i < nargs && !stop_signal (); i++) {
      struct result res;
      if (checksum_one (args[i], &spec, &res) == -1)
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
