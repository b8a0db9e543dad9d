/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: what an image's headers name (see imgrefs.h).  Each
 * reader follows the qemu block driver of the same name: the header
 * fields it reads, its limits, and for vmdk descriptors the very
 * sscanf it runs, so that nbdsum finds the names qemu would open.
 * Where qemu refuses the image itself, no name is returned: qemu's
 * own error then says why.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "imgrefs.h"
#include "minmax.h"

/* qemu's vmdk.c: descriptors are read up to 1 MiB, a parent's name
 * from the first 20 sectors of the descriptor.
 */
#define VMDK_DESC_READ_MAX ((1 << 20) - 1)
#define VMDK_DESC_SIZE (20 * 512)
#define VMDK_EMBEDDED_DESC 0x200

static uint32_t
be32 (const uint8_t *p)
{
  return (uint32_t) p[0] << 24 | (uint32_t) p[1] << 16 | p[2] << 8 | p[3];
}

static uint64_t
be64 (const uint8_t *p)
{
  return (uint64_t) be32 (p) << 32 | be32 (p + 4);
}

static uint32_t
le32 (const uint8_t *p)
{
  return (uint32_t) p[3] << 24 | (uint32_t) p[2] << 16 | p[1] << 8 | p[0];
}

static uint64_t
le64 (const uint8_t *p)
{
  return (uint64_t) le32 (p + 4) << 32 | le32 (p);
}

struct reader {
  blk_pread_fn *pread;
  void *opaque;
  char *why;
  size_t len;
};

static int __attribute__ ((format (printf, 2, 3)))
refuse (struct reader *rd, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (rd->why, rd->len, fmt, ap);
  va_end (ap);
  errno = 0;
  return -1;
}

static int
rd_pread (struct reader *rd, void *buf, size_t count, uint64_t offset)
{
  if (rd->pread (rd->opaque, buf, count, offset) == -1) {
    const int err = errno;
    snprintf (rd->why, rd->len, "read: %s", strerror (err));
    errno = err ? err : EIO;
    return -1;
  }
  return 0;
}

/* Add a name of len bytes (a C string ends at a NUL, as qemu's). */
static int
add_ref (struct reader *rd, struct blk_refs *refs, enum blk_ref_kind kind,
         const char *name, size_t len, const char *format)
{
  struct blk_ref *r;

  len = strnlen (name, len);
  if (len == 0)
    return 0;
  if (len >= BLK_REF_NAME_MAX)
    return refuse (rd, "it names a file of %zu bytes, longer than qemu "
                   "reads", len);
  if (refs->n == BLK_REFS_MAX)
    return refuse (rd, "it names more than %d files", BLK_REFS_MAX);
  if (refs->n % 16 == 0) {
    struct blk_ref *p = realloc (refs->refs, (refs->n + 16) * sizeof *p);
    if (p == NULL)
      return refuse (rd, "out of memory");
    refs->refs = p;
  }
  r = &refs->refs[refs->n];
  memset (r, 0, sizeof *r);
  r->kind = kind;
  if ((r->name = strndup (name, len)) == NULL)
    return refuse (rd, "out of memory");
  snprintf (r->format, sizeof r->format, "%s", format ? format : "");
  refs->n++;
  return 0;
}

/* Read a name of len bytes at offset into the image and add it. */
static int
add_ref_at (struct reader *rd, struct blk_refs *refs, enum blk_ref_kind kind,
            uint64_t offset, size_t len, const char *format)
{
  char *buf;
  int r;

  if (len == 0)
    return 0;
  if ((buf = malloc (len)) == NULL)
    return refuse (rd, "out of memory");
  r = rd_pread (rd, buf, len, offset);
  if (r == 0)
    r = add_ref (rd, refs, kind, buf, len, format);
  free (buf);
  return r;
}

/* qcow2.c: qcow2_do_open and qcow2_read_extensions. */
#define QCOW2_EXT_BACKING_FORMAT 0xe2792aca
#define QCOW2_EXT_DATA_FILE 0x44415441
#define QCOW2_INCOMPAT_DATA_FILE (UINT64_C (1) << 2)
#define QCOW2_BACKING_FORMAT_MAX 16     /* bs->backing_format */

static int
qcow2_refs (struct reader *rd, struct blk_refs *refs)
{
  uint8_t h[104], ext[8];
  char format[QCOW2_BACKING_FORMAT_MAX] = "";
  uint64_t backing_off, incompat = 0, cluster_size, offset, end;
  uint64_t data_off = 0;
  uint32_t version, backing_len, cluster_bits, header_len, data_len = 0;
  bool have_data = false;

  if (rd_pread (rd, h, sizeof h, 0) == -1)
    return -1;
  version = be32 (h + 4);
  backing_off = be64 (h + 8);
  backing_len = be32 (h + 16);
  cluster_bits = be32 (h + 20);
  if (version < 2 || version > 3 || cluster_bits < 9 || cluster_bits > 21)
    return 0;
  cluster_size = UINT64_C (1) << cluster_bits;
  header_len = 72;
  if (version == 3) {
    incompat = be64 (h + 72);
    header_len = be32 (h + 100);
    if (header_len < 104 || header_len > cluster_size)
      return 0;
  }
  if (backing_off > cluster_size)
    return 0;

  /* Header extensions, up to the backing file's name. */
  end = backing_off ? backing_off : cluster_size;
  for (offset = header_len; offset < end;) {
    uint32_t magic, len;

    if (rd_pread (rd, ext, sizeof ext, offset) == -1)
      return -1;
    magic = be32 (ext);
    len = be32 (ext + 4);
    offset += sizeof ext;
    if (offset > end || len > end - offset)
      return 0;
    if (magic == 0)
      break;
    if (magic == QCOW2_EXT_BACKING_FORMAT) {
      if (len >= sizeof format)
        return 0;
      if (rd_pread (rd, format, len, offset) == -1)
        return -1;
      format[len] = '\0';
    }
    else if (magic == QCOW2_EXT_DATA_FILE) {
      have_data = true;
      data_off = offset;
      data_len = len;
    }
    offset += (len + UINT64_C (7)) & ~UINT64_C (7);
  }

  /* As qemu: the data file first (the feature bit and a name; without
   * a name qemu refuses the image), then the backing file's name.
   */
  if ((incompat & QCOW2_INCOMPAT_DATA_FILE) && have_data &&
      add_ref_at (rd, refs, BLK_REF_DATA_FILE, data_off, data_len, NULL) == -1)
    return -1;
  if (backing_off == 0 ||
      backing_len > MIN ((uint64_t) 1023, cluster_size - backing_off))
    return 0;
  return add_ref_at (rd, refs, BLK_REF_BACKING, backing_off, backing_len,
                     format);
}

/* qcow.c: qcow_open. */
static int
qcow_refs (struct reader *rd, struct blk_refs *refs)
{
  uint8_t h[20];
  uint64_t off;
  uint32_t len;

  if (rd_pread (rd, h, sizeof h, 0) == -1)
    return -1;
  if (be32 (h + 4) != 1)
    return 0;
  off = be64 (h + 8);
  len = be32 (h + 16);
  if (off == 0 || len > 1023)
    return 0;
  return add_ref_at (rd, refs, BLK_REF_BACKING, off, len, NULL);
}

/* qed.c: bdrv_qed_do_open. */
#define QED_F_BACKING_FILE 0x01
#define QED_F_BACKING_FORMAT_NO_PROBE 0x04

static int
qed_refs (struct reader *rd, struct blk_refs *refs)
{
  uint8_t h[64];
  uint64_t features;
  uint32_t cluster_size, header_size, off, len;

  if (rd_pread (rd, h, sizeof h, 0) == -1)
    return -1;
  cluster_size = le32 (h + 4);
  header_size = le32 (h + 12);
  features = le64 (h + 16);
  off = le32 (h + 56);
  len = le32 (h + 60);
  if (!(features & QED_F_BACKING_FILE))
    return 0;
  if ((uint64_t) off + len > (uint64_t) cluster_size * header_size ||
      len >= BLK_REF_NAME_MAX)
    return 0;
  return add_ref_at (rd, refs, BLK_REF_BACKING, off, len,
                     features & QED_F_BACKING_FORMAT_NO_PROBE ? "raw" : NULL);
}

/* vmdk.c: vmdk_parent_open.  The parent's name, anywhere in the
 * descriptor's first 20 sectors at desc_offset, even in a comment.
 */
static int
vmdk_parent (struct reader *rd, struct blk_refs *refs, uint64_t desc_offset)
{
  static const char key[] = "parentFileNameHint";
  char *desc = calloc (1, VMDK_DESC_SIZE + 1), *p, *end;
  int r = 0;

  if (desc == NULL)
    return refuse (rd, "out of memory");
  if (rd_pread (rd, desc, VMDK_DESC_SIZE, desc_offset) == -1) {
    free (desc);
    return -1;
  }
  p = strstr (desc, key);
  if (p) {
    /* qemu skips the key, its NUL's worth and one more: '="'. */
    p += sizeof key + 1;
    if (p > desc + strlen (desc) || (end = strchr (p, '"')) == NULL)
      r = 0;                    /* qemu refuses the image */
    else
      r = add_ref (rd, refs, BLK_REF_BACKING, p, end - p, "vmdk");
  }
  free (desc);
  return r;
}

/* vmdk_parse_description: the value of key="...", as qemu finds it. */
static bool
vmdk_description (const char *desc, const char *key, char *buf, size_t size)
{
  const char *end = desc + strlen (desc), *p = strstr (desc, key), *q;

  if (p == NULL)
    return false;
  p += strlen (key) + 2;
  if (p >= end)
    return false;
  for (q = p; q < end && *q != '"'; q++)
    ;
  if (q == end || size < (size_t) (q - p) + 1)
    return false;
  memcpy (buf, p, q - p);
  buf[q - p] = '\0';
  return true;
}

struct extent_line {
  int matches;
  char access[11], type[11], name[512];
  int64_t sectors, offset;
};

/* vmdk_parse_extents' sscanf, at p: qemu's own, whose %s skips blank
 * lines into the next one.
 */
static void
scan_extent (const char *p, struct extent_line *e)
{
  e->offset = -1;
  e->matches = sscanf (p, "%10s %" SCNd64 " %10s \"%511[^\n\r\"]\" %" SCNd64,
                       e->access, &e->sectors, e->type, e->name, &e->offset);
}

static bool
extent_type_read (const char *type)
{
  return strcmp (type, "FLAT") == 0 || strcmp (type, "SPARSE") == 0 ||
    strcmp (type, "VMFS") == 0 || strcmp (type, "VMFSSPARSE") == 0 ||
    strcmp (type, "SESPARSE") == 0;
}

static const char *
next_line (const char *s)
{
  while (*s && *s != '\n')
    s++;
  return *s ? s + 1 : s;
}

/* One line of the descriptor, alone, for messages and for the reading
 * its author meant.
 */
static void
copy_line (const char *p, char *buf, size_t size)
{
  size_t n = strcspn (p, "\r\n");

  n = MIN (n, size - 1);
  memcpy (buf, p, n);
  buf[n] = '\0';
}

/* vmdk_open_desc_file and vmdk_parse_extents.  nbdsum also reads each
 * line alone: an extent line qemu skips (RDONLY, NOACCESS, ZERO, a
 * type it does not read) is served as nothing, and one that qemu
 * reads from a blank line before it counts twice; both are refused.
 */
static int
vmdk_descriptor (struct reader *rd, struct blk_refs *refs, const char *desc)
{
  static const char *const types[] = {
    "monolithicFlat", "vmfs", "vmfsSparse", "seSparse",
    "twoGbMaxExtentSparse", "twoGbMaxExtentFlat",
  };
  char ct[128], line[80];
  bool known = false;

  if (!vmdk_description (desc, "createType", ct, sizeof ct))
    return 0;
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
    known |= strcmp (ct, types[i]) == 0;
  if (!known)
    return 0;
  refs->descriptor = true;

  for (const char *p = desc; *p; p = next_line (p)) {
    struct extent_line q, alone;
    char own[1024];

    scan_extent (p, &q);
    copy_line (p, own, sizeof own);
    scan_extent (own, &alone);
    copy_line (p, line, sizeof line);
    if (alone.matches >= 3 &&
        (strcmp (alone.access, "RW") == 0 ||
         strcmp (alone.access, "RDONLY") == 0 ||
         strcmp (alone.access, "NOACCESS") == 0) &&
        (strcmp (alone.access, "RW") != 0 || alone.matches < 4 ||
         alone.sectors <= 0 || !extent_type_read (alone.type)))
      return refuse (rd, "its extent line '%s' is one qemu skips, giving "
                     "no data for it", line);
    if (q.matches < 4 || strcmp (q.access, "RW") != 0)
      continue;
    /* What qemu refuses ("Invalid extent line"): no names then. */
    if ((strcmp (q.type, "FLAT") == 0 && (q.matches != 5 || q.offset < 0)) ||
        (strcmp (q.type, "VMFS") == 0 && q.matches != 4) ||
        (strcmp (q.type, "FLAT") != 0 && strcmp (q.type, "VMFS") != 0 &&
         q.matches != 4)) {
      blk_refs_free (refs);
      return 0;
    }
    if (q.sectors <= 0 || !extent_type_read (q.type))
      continue;
    if (alone.matches != q.matches || alone.sectors != q.sectors ||
        strcmp (alone.type, q.type) != 0 || strcmp (alone.name, q.name) != 0)
      return refuse (rd, "qemu reads its extent '%s' across a line break "
                     "(from a blank line before it, or a field on the "
                     "next line), not as its line says", q.name);
    if (add_ref (rd, refs, BLK_REF_EXTENT, q.name, strlen (q.name), NULL)
        == -1)
      return -1;
    snprintf (refs->refs[refs->n - 1].type, BLK_EXTENT_TYPE_MAX, "%s",
              q.type);
    refs->refs[refs->n - 1].sectors = q.sectors;
    refs->refs[refs->n - 1].offset = q.offset < 0 ? 0 : q.offset;
    refs->refs[refs->n - 1].line = p - desc;
    if ((uint64_t) q.sectors > (UINT64_MAX >> 9) - refs->descriptor_size / 512)
      return refuse (rd, "its extents add up to more than 2^64 bytes");
    refs->descriptor_size += (uint64_t) q.sectors * 512;
  }
  if (refs->n == 0)
    return refuse (rd, "its descriptor names no extent that qemu reads");
  return 0;
}

#define VMDK3_MAGIC 0x434f5744          /* "COWD" */
#define VMDK4_MAGIC 0x4b444d56          /* "KDMV" */

/* vmdk.c: vmdk_open. */
static int
vmdk_refs (struct reader *rd, struct blk_refs *refs, uint64_t file_size)
{
  uint8_t h[44];
  char *desc;
  size_t n;
  int r;

  if (file_size < 4)
    return 0;
  if (rd_pread (rd, h, sizeof h, 0) == -1)
    return -1;
  if (be32 (h) == VMDK4_MAGIC || be32 (h) == VMDK3_MAGIC) {
    /* A sparse file whose header holds a descriptor of other extents
     * in place of a size: qemu reads it, nbdsum does not.
     */
    if (be32 (h) == VMDK4_MAGIC && le64 (h + 12) == 0 && le64 (h + 28) != 0)
      return refuse (rd, "its sparse header holds a descriptor of other "
                     "extents");
    return vmdk_parent (rd, refs, VMDK_EMBEDDED_DESC);
  }
  n = MIN (file_size, (uint64_t) VMDK_DESC_READ_MAX);
  if ((desc = malloc (n + 1)) == NULL)
    return refuse (rd, "out of memory");
  if (rd_pread (rd, desc, n, 0) == -1) {
    free (desc);
    return -1;
  }
  desc[n] = '\0';
  r = vmdk_descriptor (rd, refs, desc);
  if (r == 0 && refs->descriptor) {
    refs->text = desc;
    return vmdk_parent (rd, refs, 0);
  }
  free (desc);
  return r;
}

int
blk_image_refs (const char *format, blk_pread_fn *pread, void *opaque,
                uint64_t file_size, struct blk_refs *refs,
                char *why, size_t len)
{
  struct reader rd = { pread, opaque, why, len };
  int r = 0;

  memset (refs, 0, sizeof *refs);
  if (len)
    why[0] = '\0';
  if (strcmp (format, "qcow2") == 0)
    r = qcow2_refs (&rd, refs);
  else if (strcmp (format, "qcow") == 0)
    r = qcow_refs (&rd, refs);
  else if (strcmp (format, "qed") == 0)
    r = qed_refs (&rd, refs);
  else if (strcmp (format, "vmdk") == 0)
    r = vmdk_refs (&rd, refs, file_size);
  /* The others name no file: raw, vhdx and vpc (qemu refuses their
   * differencing kinds), vdi, parallels, bochs, cloop, dmg.
   */
  if (r == -1)
    blk_refs_free (refs);
  return r;
}

void
blk_refs_free (struct blk_refs *refs)
{
  for (size_t i = 0; i < refs->n; i++)
    free (refs->refs[i].name);
  free (refs->refs);
  free (refs->text);
  memset (refs, 0, sizeof *refs);
}

bool
blk_ref_has_protocol (const char *name)
{
  return name[strcspn (name, ":/")] == ':';
}

const char *
blk_vmdk_sparse_extent_check (const char *type, const uint8_t *head)
{
  if (strcmp (type, "SESPARSE") == 0)
    return le64 (head) == 0xcafebabe ? NULL
      : "it is not a seSparse extent";
  if (be32 (head) == VMDK3_MAGIC)
    return NULL;
  if (be32 (head) != VMDK4_MAGIC)
    return "it is not a sparse vmdk extent";
  if (le64 (head + 12) == 0 && le64 (head + 28) != 0)
    return "its sparse header holds a descriptor of other extents";
  return NULL;
}
