/* nbdsum: print or check blkhash checksums of disk images. */
#include <config.h>

#include <inttypes.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nbdsum.h"
#include "util.h"

const char *progname = "nbdsum";

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
  if (opts.check)
    status = check_files (&argv[first], argc - first);
  else if (any_view (&argv[first], argc - first))
    status = opts.diff ? 2 : EXIT_FAILURE;
  else if (opts.diff)
    status = diff_images (argv[first], argv[first + 1]);
  else if (opts.blocks)
    status = print_blocks (argv[first]);
  else {
    for (i = first; i < argc; i++) {
      struct result res;
      if (checksum_one (argv[i], &res) == -1)
        status = EXIT_FAILURE;
      else
        print_result (&res);
    }
  }
  if (fflush (stdout) == EOF || ferror (stdout)) {
    perror ("nbdsum: stdout");
    status = EXIT_FAILURE;
  }
  return status;
}
