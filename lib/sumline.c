/* nbdkit-blkhash: writing and reading checksum lines. */
#include <config.h>

#include <ctype.h>
#include <string.h>

#include "sumline.h"

bool
blk_name_needs_escape (const char *name)
{
  return strpbrk (name, "\\\n\r") != NULL;
}

void
blk_fput_name (FILE *fp, const char *name, bool escape)
{
  for (const char *p = name; *p; p++) {
    if (escape && *p == '\\')
      fputs ("\\\\", fp);
    else if (escape && *p == '\n')
      fputs ("\\n", fp);
    else if (escape && *p == '\r')     /* as sha256sum: a CR ends lines */
      fputs ("\\r", fp);
    else
      fputc (*p, fp);
  }
}

void
blk_fput_sum_line (FILE *fp, const char *hex, const char *name)
{
  const bool escape = blk_name_needs_escape (name);

  fprintf (fp, "%s%s  ", escape ? "\\" : "", hex);
  blk_fput_name (fp, name, escape);
  fputc ('\n', fp);
}

/* Files edited elsewhere may end lines with "\r\n". */
static void
chomp (char *line)
{
  size_t len = strlen (line);

  while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
    line[--len] = '\0';
}

/* Undo the escapes in place.  -1 on a '\\' not starting one.
 * sha256sum (coreutils 9) also writes "\\r", so accept it.
 */
static int
unescape (char *name)
{
  char *out = name;

  for (const char *p = name; *p; p++) {
    if (*p != '\\')
      *out++ = *p;
    else if (p[1] == '\\')
      *out++ = '\\', p++;
    else if (p[1] == 'n')
      *out++ = '\n', p++;
    else if (p[1] == 'r')
      *out++ = '\r', p++;
    else
      return -1;
  }
  *out = '\0';
  return 0;
}

int
blk_sum_line_parse (char *line, size_t hexlen, char **hex, char **name)
{
  const int escaped = line[0] == '\\';
  char *p = line + escaped;
  size_t n = 0;

  chomp (line);
  while (isxdigit ((unsigned char) p[n]))
    n++;
  /* Two spaces, or a space and '*' (binary mode), then the name. */
  if (n != hexlen || p[n] != ' ' || (p[n + 1] != ' ' && p[n + 1] != '*') ||
      p[n + 2] == '\0')
    return -1;
  p[n] = '\0';
  *hex = p;
  *name = p + n + 2;
  return escaped ? unescape (*name) : 0;
}
