/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: image formats and probing them (see imgformat.h).
 * Each probe below reads what the qemu 7.2 block driver of the same
 * name reads, and scores as it does: 100 for a magic, 2 for cloop's
 * script and dmg's file name, 1 for raw; the highest score wins.
 */
#include <config.h>

#include <string.h>
#include <strings.h>

#include "imgformat.h"

const char *const blk_image_formats[] = {
  "raw", "qcow2", "qcow", "qed", "vmdk", "vhdx", "vpc", "vdi", "parallels",
  "bochs", "cloop", "dmg", NULL
};

const char *
blk_image_format_n (const char *name, size_t len)
{
  for (size_t i = 0; blk_image_formats[i]; i++)
    if (strlen (blk_image_formats[i]) == len &&
        strncasecmp (blk_image_formats[i], name, len) == 0)
      return blk_image_formats[i];
  return NULL;
}

const char *
blk_image_format (const char *name)
{
  return blk_image_format_n (name, strlen (name));
}

static uint32_t
be32 (const uint8_t *p)
{
  return (uint32_t) p[0] << 24 | (uint32_t) p[1] << 16 | p[2] << 8 | p[3];
}

static uint32_t
le32 (const uint8_t *p)
{
  return (uint32_t) p[3] << 24 | (uint32_t) p[2] << 16 | p[1] << 8 | p[0];
}

/* qemu compares some header fields with strcmp: the string, then NUL. */
static bool
cstr_at (const uint8_t *buf, size_t off, const char *s)
{
  return memcmp (buf + off, s, strlen (s) + 1) == 0;
}

#define QCOW_MAGIC 0x514649fb           /* "QFI\xfb" */

static int
probe_qcow2 (const uint8_t *b)
{
  return be32 (b) == QCOW_MAGIC && be32 (b + 4) >= 2 ? 100 : 0;
}

static int
probe_qcow (const uint8_t *b)
{
  return be32 (b) == QCOW_MAGIC && be32 (b + 4) == 1 ? 100 : 0;
}

/* The header's crypt_method: qcow2's at 32, after the size; qcow's at
 * 36, after the cluster and L2 bits.
 */
static bool
qcow_encrypted (const uint8_t *b, const char *format)
{
  if (strcmp (format, "qcow2") == 0)
    return be32 (b + 32) != 0;
  if (strcmp (format, "qcow") == 0)
    return be32 (b + 36) != 0;
  return false;
}

static int
probe_qed (const uint8_t *b)
{
  return memcmp (b, "QED\0", 4) == 0 ? 100 : 0;
}

/* A version line, as qemu's vmdk_probe reads it at b[i..end). */
static bool
vmdk_version_at (const uint8_t *b, size_t i, size_t end)
{
  static const char *const lines[] = {
    "version=1\n", "version=2\n", "version=3\n",
    "version=1\r\n", "version=2\r\n", "version=3\r\n",
  };

  for (size_t k = 0; k < sizeof lines / sizeof lines[0]; k++) {
    const size_t n = strlen (lines[k]);
    if (end - i >= n && memcmp (b + i, lines[k], n) == 0)
      return true;
  }
  return false;
}

/* Sparse extents by their magic; a descriptor (a text file naming
 * the extents) by its version line, after comment lines and lines of
 * spaces only.
 */
static int
probe_vmdk (const uint8_t *b)
{
  const size_t end = BLK_PROBE_HEAD;
  size_t i = 0;

  if (memcmp (b, "COWD", 4) == 0 || memcmp (b, "KDMV", 4) == 0)
    return 100;
  while (i < end) {
    if (b[i] == '#') {
      while (i < end && b[i] != '\n')
        i++;
      i++;
      continue;
    }
    if (b[i] == ' ') {
      while (i < end && b[i] == ' ')
        i++;
      if (i < end && b[i] == '\r')
        i++;
      if (i == end || b[i] != '\n')
        return 0;
      i++;
      continue;
    }
    return vmdk_version_at (b, i, end) ? 100 : 0;
  }
  return 0;
}

static int
probe_vhdx (const uint8_t *b)
{
  return memcmp (b, "vhdxfile", 8) == 0 ? 100 : 0;
}

/* A dynamic VHD; a fixed one has its footer only at the end. */
static int
probe_vpc (const uint8_t *b)
{
  return memcmp (b, "conectix", 8) == 0 ? 100 : 0;
}

static int
probe_vdi (const uint8_t *b)
{
  return le32 (b + 64) == 0xbeda107f ? 100 : 0;
}

static int
probe_parallels (const uint8_t *b)
{
  return (memcmp (b, "WithoutFreeSpace", 16) == 0 ||
          memcmp (b, "WithouFreSpacExt", 16) == 0) &&
    le32 (b + 16) == 2 ? 100 : 0;
}

static int
probe_bochs (const uint8_t *b)
{
  const uint32_t version = le32 (b + 64);

  return cstr_at (b, 0, "Bochs Virtual HD Image") &&
    cstr_at (b, 32, "Redolog") && cstr_at (b, 48, "Growing") &&
    (version == 0x00020000 || version == 0x00010000) ? 100 : 0;
}

static int
probe_cloop (const uint8_t *b)
{
  static const char script[] =
    "#!/bin/sh\n"
    "#V2.0 Format\n"
    "modprobe cloop file=$0 && mount -r -t iso9660 /dev/cloop $1\n";

  return memcmp (b, script, strlen (script)) == 0 ? 2 : 0;
}

static int
probe_luks (const uint8_t *b)
{
  return memcmp (b, "LUKS\xba\xbe", 6) == 0 && b[6] == 0 && b[7] == 1
    ? 100 : 0;
}

void
blk_probe_image (const uint8_t *head, size_t len, const char *name,
                 const uint8_t *footer, struct blk_probe *p)
{
  static const struct {
    const char *format;
    int (*probe) (const uint8_t *b);
  } probes[] = {
    { "qcow2", probe_qcow2 }, { "qcow", probe_qcow }, { "qed", probe_qed },
    { "vmdk", probe_vmdk }, { "vhdx", probe_vhdx }, { "vpc", probe_vpc },
    { "vdi", probe_vdi }, { "parallels", probe_parallels },
    { "bochs", probe_bochs }, { "cloop", probe_cloop },
    { "luks", probe_luks },
  };
  uint8_t b[BLK_PROBE_HEAD] = { 0 };
  size_t name_len = name ? strlen (name) : 0;
  int best = 1, score;

  *p = (struct blk_probe) { .format = "raw" };
  /* qemu: an empty file is raw. */
  if (len == 0)
    return;
  memcpy (b, head, len < sizeof b ? len : sizeof b);
  for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
    score = probes[i].probe (b);
    if (score > best) {
      best = score;
      p->format = probes[i].format;
      p->also = NULL;
    }
    else if (score == best && score > 1 && p->also == NULL)
      p->also = probes[i].format;
  }
  /* dmg by its name alone. */
  if (name_len > 4 && strcmp (name + name_len - 4, ".dmg") == 0) {
    if (2 > best) {
      best = 2;
      p->format = "dmg";
      p->also = NULL;
    }
    else if (best == 2 && p->also == NULL)
      p->also = "dmg";
  }
  p->fixed_vhd = best == 1 && footer && memcmp (footer, "conectix", 8) == 0;
  p->encrypted = qcow_encrypted (b, p->format);
}
