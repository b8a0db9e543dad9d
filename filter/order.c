/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash filter: where blkhash sits among nbdkit's filters.
 *
 * A filter in front of blkhash sees the views as data exports of the
 * same plugin.  One that keeps data (cache, cow, readahead) can serve
 * view bytes as image data or write them back into the image, and one
 * that makes exports writable (cow) makes the views writable; one that
 * changes bytes, sizes or names (offset, partition, truncate, qcow2dec,
 * ...) makes the view describe something else than its data export.
 * So blkhash must come first, behind only filters that pass requests
 * through unchanged.
 *
 * nbdkit tells a filter nothing of the filters in front of it, and its
 * command line says only how they were spelt (--fi=cache, a path, a
 * renamed copy).  What they are is in the process: nbdkit dlopen()s
 * the plugin, then the filters innermost first (it prepends each
 * --filter to a list, then wraps the plugin in list order), so in the
 * dynamic linker's list of objects, in load order, every filter
 * loaded after blkhash's own object is in front of it.  Each filter
 * exports filter_init (NBDKIT_REGISTER_FILTER), which returns its
 * struct nbdkit_filter, whose name is what the filter is.  blkhash
 * finds its own object by the address of its code, not by file name.
 *
 * A filter object loaded before the plugin or with nbdkit itself
 * (LD_PRELOAD: the list has nbdkit, then preloaded objects, then the
 * libraries nbdkit needs, its C library among them, then what it
 * dlopen()s), or that is the plugin's own object, is where nbdkit's
 * dlopen() finds it, so its place in the list says nothing of its
 * place among the filters: one that does not pass requests through is
 * refused.  So is blkhash loaded with nbdkit itself.
 *
 * One case the list cannot show: a filter given twice is loaded once,
 * at its innermost place.  nbdkit calls .load once per --filter, so
 * blkhash counts its own; for the others, the number of --filter
 * options on the command line (/proc/self/cmdline) against the filters
 * found says whether one is given twice, and then a filter behind
 * blkhash that does not pass requests through might also be in front:
 * refused.  More options than filters found, with only pass-through
 * filters, is accepted only when values given twice as the same
 * string account for it; else a filter blkhash could not see may be
 * in front: refused.  Whatever cannot be decided is refused, never
 * passed.
 *
 * The plugin's object also says what the plugin is: plugin_init
 * returns its struct nbdkit_plugin, whose name passive.c needs.
 */
#include <config.h>

#include <dlfcn.h>
#include <link.h>
#ifdef __GLIBC__
#include <gnu/libc-version.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "filter.h"             /* before nbdkit-plugin.h: the API version */
#include "minmax.h"

#include <nbdkit-plugin.h>

/* Filters that may sit in front of blkhash: they pass every request,
 * name and answer through, or fail it, and keep no data.  By the names
 * the filters give themselves: --filter=error is "error-inject".
 */
static const char *const pass_through[] = {
  "delay", "error-inject", "exitlast", "exitwhen", "ip", "limit", "log",
  "noparallel", "nofilter", "rate", "stats", NULL,
};

#define PASS_THROUGH_LIST \
  "delay, error, exitlast, exitwhen, ip, limit, log, noparallel, " \
  "nofilter, rate and stats"

/* Filters whose extents may call data a hole: the cache filter passes
 * its plugin's extents through while blocks written to it are still
 * in its cache only (cache=writeback, unsafe).
 */
static const char *const extents_untrue[] = { "cache", NULL };

/* One of them is behind blkhash: holes are never taken from extents. */
static bool extents_unusable;

bool
blkhash_extents_usable (nbdkit_next *next)
{
  return !extents_unusable && next->can_extents (next) == 1;
}

/* How many times nbdkit registered blkhash (its .load). */
static unsigned registrations;

/* The plugin's name, from its object (it stays loaded while blkhash
 * is).
 */
static const char *plugin_name;

const char *
blkhash_plugin_name (void)
{
  return plugin_name;
}

void
blkhash_order_loaded (void)
{
  registrations++;
}

/* A loaded object, from the dynamic linker's list. */
struct object {
  char *path;                   /* as the linker has it; "" for nbdkit */
  ElfW(Addr) base;
  const ElfW(Phdr) *phdr;
  ElfW(Half) phnum;
};

struct objects {
  struct object *v;
  size_t n, cap;
  bool failed;
};

static int
collect (struct dl_phdr_info *info, size_t size, void *opaque)
{
  struct objects *o = opaque;
  struct object *v;

  if (o->n == o->cap) {
    o->cap = o->cap ? o->cap * 2 : 64;
    v = realloc (o->v, o->cap * sizeof *v);
    if (v == NULL)
      goto failed;
    o->v = v;
  }
  v = &o->v[o->n];
  v->path = strdup (info->dlpi_name ? info->dlpi_name : "");
  if (v->path == NULL)
    goto failed;
  v->base = info->dlpi_addr;
  v->phdr = info->dlpi_phdr;
  v->phnum = info->dlpi_phnum;
  o->n++;
  return 0;

 failed:
  o->failed = true;
  return 1;
}

static void
objects_free (struct objects *o)
{
  for (size_t i = 0; i < o->n; i++)
    free (o->v[i].path);
  free (o->v);
}

/* Whether address p is in one of object's loaded segments. */
static bool
contains (const struct object *obj, const void *p)
{
  const ElfW(Addr) a = (ElfW(Addr)) p;

  for (ElfW(Half) i = 0; i < obj->phnum; i++) {
    const ElfW(Phdr) *ph = &obj->phdr[i];
    if (ph->p_type == PT_LOAD &&
        a >= obj->base + ph->p_vaddr &&
        a - (obj->base + ph->p_vaddr) < ph->p_memsz)
      return true;
  }
  return false;
}

/* Symbol sym if the object defines it itself (not a library it
 * uses): 0 with *p set (NULL if it does not), -1 if the object cannot
 * be looked at.
 */
static int
own_symbol (const struct object *obj, const char *sym, void **p)
{
  void *h;

  *p = NULL;
  if (obj->path[0] == '\0')
    return -1;
  h = dlopen (obj->path, RTLD_NOLOAD | RTLD_LAZY);
  if (h == NULL)
    return -1;
  *p = dlsym (h, sym);
  dlclose (h);
  if (*p && !contains (obj, *p))
    *p = NULL;
  return 0;
}

/* What a filter object is: its struct nbdkit_filter's name, or NULL
 * if it does not look like a filter of this nbdkit (which nbdkit would
 * not have registered).
 */
static const char *
filter_name (void *filter_init)
{
  struct nbdkit_filter *(*init) (void) =
    (struct nbdkit_filter *(*) (void)) filter_init;
  const struct nbdkit_filter *f = init ();

  /* nbdkit guarantees only these two fields' place, and registers a
   * filter only if they match its own: then the rest is ours too.
   */
  if (f == NULL || f->_api_version != NBDKIT_FILTER_API_VERSION ||
      f->_version == NULL || strcmp (f->_version, NBDKIT_VERSION_STRING) != 0)
    return NULL;
  return f->name;
}

/* What the plugin is: its struct nbdkit_plugin's name.  nbdkit keeps
 * the fields up to the name in place across versions, and registers
 * no plugin without one.
 */
static const char *
get_plugin_name (void *plugin_init)
{
  struct nbdkit_plugin *(*init) (void) =
    (struct nbdkit_plugin *(*) (void)) plugin_init;
  const struct nbdkit_plugin *p = init ();

  return p ? p->name : NULL;
}

static bool
passes_through (const char *name)
{
  for (size_t i = 0; pass_through[i]; i++)
    if (strcmp (name, pass_through[i]) == 0)
      return true;
  return false;
}

/* Whether value v is among the n values before it. */
static bool
seen (const char **values, size_t n, const char *v)
{
  for (size_t i = 0; i < n; i++)
    if (strcmp (values[i], v) == 0)
      return true;
  return false;
}

/* The number of --filter options on nbdkit's command line, as getopt
 * reads it: any unambiguous abbreviation ("--fi=X", "--filt X"), up to
 * "--"; *distinct, how many different values they give.  -1 if the
 * command line cannot be read.
 */
static int
count_filter_options (int *distinct)
{
  CLEANUP_FREE char *buf = NULL;
  CLEANUP_FREE const char **values = NULL;
  size_t size = 0, len = 0, i;
  FILE *fp;
  int n = 0;

  fp = fopen ("/proc/self/cmdline", "re");
  if (fp == NULL)
    return -1;
  for (;;) {
    char *p;
    if (len == size) {
      size = size ? size * 2 : 4096;
      p = realloc (buf, size);
      if (p == NULL) {
        fclose (fp);
        return -1;
      }
      buf = p;
    }
    i = fread (buf + len, 1, size - len, fp);
    if (i == 0)
      break;
    len += i;
  }
  if (ferror (fp) || len == 0 || buf[len - 1] != '\0') {
    fclose (fp);
    return -1;
  }
  fclose (fp);

  /* No more values than arguments: one per NUL. */
  values = malloc (len * sizeof *values);
  if (values == NULL)
    return -1;

  /* argv[0], then each argument. */
  *distinct = 0;
  for (i = strlen (buf) + 1; i < len; i += strlen (buf + i) + 1) {
    const char *a = buf + i, *v;
    size_t name_len;

    if (strcmp (a, "--") == 0)
      break;
    if (strncmp (a, "--", 2) != 0)
      continue;
    name_len = strcspn (a + 2, "=");
    /* nbdkit refused any abbreviation that is not only --filter's. */
    if (name_len == 0 || name_len > 6 || strncmp (a + 2, "filter", name_len))
      continue;
    v = a + 2 + name_len;
    if (*v == '=')
      v++;
    else if (i + strlen (a) + 1 < len) {
      i += strlen (a) + 1;      /* its value: "--filter X" */
      v = buf + i;
    }
    if (!seen (values, n, v))
      (*distinct)++;
    values[n++] = v;
  }
  return n;
}

static void
refuse_in_front (const char *name, const char *path)
{
  blkhash_error ("blkhash: the %s filter (%s) is in front of blkhash: it "
                 "would see the views as data (serving view bytes as image "
                 "data, writing them into the image, making views writable, "
                 "or describing other bytes than the export's).  Give "
                 "--filter=blkhash before it on the command line; only "
                 PASS_THROUGH_LIST " may come before blkhash.", name, path);
}

static void
refuse_unplaced (const char *name, const char *path, bool is_plugin)
{
  blkhash_error ("blkhash: the %s filter (%s) %s, so blkhash cannot tell "
                 "where it sits among the filters: it may be in front of "
                 "blkhash.  Load filters with --filter only; only "
                 PASS_THROUGH_LIST " may be loaded otherwise.", name, path,
                 is_plugin ? "is also nbdkit's plugin"
                 : "was loaded before nbdkit's plugin or with nbdkit itself "
                 "(by LD_PRELOAD, say)");
}

/* The index of the last object known to be loaded with nbdkit itself
 * (its C library), or 0 if it cannot be found.
 */
static size_t
startup_end (const struct objects *o)
{
#ifdef __GLIBC__
  for (size_t i = 0; i < o->n; i++)
    if (contains (&o->v[i], (void *) gnu_get_libc_version))
      return i;
#endif
  return 0;
}

/* Filter objects up to index last (the plugin's object, or the last
 * loaded with nbdkit) are not placed by their load order: 0 with
 * *found counting those that pass requests through, -1 (error
 * printed) for any other.  Objects that cannot be looked at (nbdkit,
 * the vDSO) are not filters.
 */
static int
check_unplaced (const struct objects *o, size_t plugin, size_t last,
                unsigned *found)
{
  for (size_t i = 0; i <= last; i++) {
    void *init;
    const char *name;

    if (own_symbol (&o->v[i], "filter_init", &init) == -1 || init == NULL)
      continue;
    name = filter_name (init);
    if (name == NULL) {
      blkhash_error ("blkhash: cannot tell which filter %s is (it is not "
                     "built for nbdkit %s)", o->v[i].path,
                     NBDKIT_VERSION_STRING);
      return -1;
    }
    nbdkit_debug ("blkhash: the %s filter (%s) is loaded %s", name,
                  o->v[i].path, i == plugin ? "as nbdkit's plugin"
                  : "before nbdkit's plugin or with nbdkit");
    if (!passes_through (name)) {
      refuse_unplaced (name, o->v[i].path, i == plugin);
      return -1;
    }
    (*found)++;
  }
  return 0;
}

int
blkhash_order_check (void)
{
  struct objects o = { 0 };
  size_t self = 0, plugin = 0, last, i;
  const char *behind = NULL;    /* a filter behind that changes things */
  unsigned filters = 0;
  int options, distinct = 0, ret = -1;

  if (registrations > 1) {
    blkhash_error ("blkhash: --filter=blkhash is given more than once: one "
                   "would be in front of the other.  Give it once.");
    return -1;
  }

  dl_iterate_phdr (collect, &o);
  if (o.failed) {
    blkhash_error ("blkhash: out of memory");
    goto out;
  }
  while (self < o.n && !contains (&o.v[self], (void *) blkhash_order_check))
    self++;
  for (plugin = 0; plugin < self; plugin++) {
    void *init;
    if (own_symbol (&o.v[plugin], "plugin_init", &init) == 0 && init) {
      plugin_name = get_plugin_name (init);
      break;
    }
  }
  if (self == o.n || plugin == self) {
    blkhash_error ("blkhash: cannot find %s among the loaded objects, so "
                   "cannot check which filters are in front of blkhash",
                   self == o.n ? "blkhash itself" : "nbdkit's plugin");
    goto out;
  }
  if (plugin_name == NULL) {
    blkhash_error ("blkhash: cannot tell which plugin %s is",
                   o.v[plugin].path);
    goto out;
  }
  nbdkit_debug ("blkhash: the plugin is %s (%s)", plugin_name,
                o.v[plugin].path);
  last = startup_end (&o);
  if (self <= last) {
    blkhash_error ("blkhash: blkhash (%s) was loaded with nbdkit itself (by "
                   "LD_PRELOAD, say), so it cannot tell which filters are in "
                   "front of it.  Load it with --filter only.",
                   o.v[self].path);
    goto out;
  }
  last = MAX (last, plugin);
  if (check_unplaced (&o, plugin, last, &filters) == -1)
    goto out;

  /* Filters loaded after those and before blkhash are behind it,
   * those after it in front.  Libraries without filter_init are not
   * filters.
   */
  for (i = last + 1; i < o.n; i++) {
    void *init;
    const char *name;

    filters += i == self;
    if (i == self)
      continue;
    if (own_symbol (&o.v[i], "filter_init", &init) == -1) {
      blkhash_error ("blkhash: cannot tell whether %s, loaded after nbdkit's "
                     "plugin, is a filter, and where it is",
                     o.v[i].path[0] ? o.v[i].path : "an unnamed object");
      goto out;
    }
    if (init == NULL)
      continue;
    filters++;
    name = filter_name (init);
    if (name == NULL) {
      blkhash_error ("blkhash: cannot tell which filter %s is (it is not "
                     "built for nbdkit %s)", o.v[i].path,
                     NBDKIT_VERSION_STRING);
      goto out;
    }
    nbdkit_debug ("blkhash: the %s filter (%s) is %s blkhash", name,
                  o.v[i].path, i < self ? "behind" : "in front of");
    for (size_t j = 0; i < self && extents_untrue[j]; j++)
      if (strcmp (name, extents_untrue[j]) == 0) {
        nbdkit_debug ("blkhash: behind the %s filter: every block is read, "
                      "none taken for a hole from extents", name);
        extents_unusable = true;
      }
    if (passes_through (name))
      continue;
    if (i > self) {
      refuse_in_front (name, o.v[i].path);
      goto out;
    }
    if (behind == NULL)
      behind = name;
  }

  /* A filter given twice is loaded once, behind blkhash if either of
   * its places is: only the command line can tell.
   */
  options = count_filter_options (&distinct);
  if (behind && options != (int) filters) {
    if (options == -1)
      blkhash_error ("blkhash: the %s filter is behind blkhash, and nbdkit's "
                     "command line cannot be read to check that it is not "
                     "also given in front of it", behind);
    else
      blkhash_error ("blkhash: the %s filter is behind blkhash, and there "
                     "are %d --filter options for %u filters: one is given "
                     "more than once, and blkhash cannot tell whether %s is "
                     "also in front of it.  Give each filter once.",
                     behind, options, filters, behind);
    goto out;
  }
  /* Fewer filters than options: values given twice must explain it. */
  if (options > (int) filters && distinct > (int) filters) {
    blkhash_error ("blkhash: there are %d --filter options for the %u "
                   "filters blkhash found, and filters given twice in the "
                   "same spelling do not explain it: a filter blkhash cannot "
                   "see, or one given twice in two spellings, may be in "
                   "front of blkhash.  Give each filter once.",
                   options, filters);
    goto out;
  }
  ret = 0;

 out:
  objects_free (&o);
  return ret;
}
