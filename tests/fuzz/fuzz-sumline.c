/* Fuzz target: checksum lines, as nbdsum -c reads them from a file.
 *
 * A line that parses must have exactly the hex length asked for and a
 * name, and what blk_fput_sum_line writes must parse back to the same
 * hex and name.  The input is also tried as a name to write.
 */
#include <config.h>

#include <stdbool.h>

#include "sumline.h"
#include "fuzz.h"

#define HEX_DIGITS "0123456789abcdefABCDEF"

/* Names nbdsum can write: not empty. */
static bool
writable (const char *name)
{
  const size_t len = strlen (name);

  return len > 0;
}

/* Write hex and name as nbdsum does, and read the line back. */
static void
round_trip (const char *hex, const char *name)
{
  char *line = NULL, *hex2, *name2;
  size_t len = 0;
  FILE *fp = open_memstream (&line, &len);

  PROPERTY (fp != NULL);
  blk_fput_sum_line (fp, hex, name);
  PROPERTY (fclose (fp) == 0);
  /* One line, whatever is in the name. */
  PROPERTY (len > 0 && memchr (line, '\n', len) == line + len - 1);
  PROPERTY (blk_sum_line_parse (line, strlen (hex), &hex2, &name2) == 0);
  PROPERTY (strcmp (hex, hex2) == 0);
  PROPERTY (strcmp (name, name2) == 0);
  free (line);
}

static void
check_line (const char *text, size_t hexlen)
{
  char *line = fuzz_strdup (text), *hex, *name;

  if (blk_sum_line_parse (line, hexlen, &hex, &name) == 0) {
    PROPERTY (strlen (hex) == hexlen);
    PROPERTY (strspn (hex, HEX_DIGITS) == hexlen);
    PROPERTY (*name != '\0');
    /* Both point into the line. */
    PROPERTY (hex >= line && hex <= line + 1);
    PROPERTY (name > hex + hexlen && name < line + strlen (text));
    if (writable (name))
      round_trip (hex, name);
  }
  free (line);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  char *text = fuzz_string (data, size);
  /* The hex length the line has, so most inputs get past it. */
  const size_t n = strspn (text + (text[0] == '\\'), HEX_DIGITS);

  check_line (text, n);
  if (n != 64)
    check_line (text, 64);      /* sha256, nbdsum's default */
  if (writable (text))
    round_trip ("0123456789abcdef", text);
  free (text);
  return 0;
}
