/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: what a disk image's own headers name, read as qemu
 * (7.2 to 11) reads them: the other files qemu opens to give its guest
 * content.  A backing file (qcow2, qcow, qed, a vmdk's parent), a qcow2
 * external data file, a vmdk descriptor's extents.
 *
 * These names are the image's, so whoever made the image chose them:
 * nbdsum checks each against its policy (client/local-chain.c) before
 * qemu opens anything, then tells qemu exactly which files to open.
 * Parsing only: nothing here opens a file; the caller gives a reader.
 */
#ifndef BLKHASH_IMGREFS_H
#define BLKHASH_IMGREFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "imgformat.h"

enum blk_ref_kind {
  BLK_REF_BACKING,              /* qemu's backing file (a vmdk's parent) */
  BLK_REF_DATA_FILE,            /* a qcow2 external data file */
  BLK_REF_EXTENT,               /* a vmdk descriptor's extent */
};

/* The longest name qemu takes (its PATH_MAX buffers), with the NUL. */
#define BLK_REF_NAME_MAX 4096
/* Extents nbdsum reads in one descriptor (a 2 TB twoGbMaxExtent disk
 * has 1024).
 */
#define BLK_REFS_MAX 4096
/* qemu's vmdk extent types, the longest is 10 bytes ("VMFSSPARSE"). */
#define BLK_EXTENT_TYPE_MAX 11

struct blk_ref {
  enum blk_ref_kind kind;
  char *name;                   /* as the image spells it, malloc'd */
  /* BACKING: the format the image names for it ("raw" for qed's
   * no-probe flag, "vmdk" for a vmdk's parent), or "": qemu probes.
   */
  char format[BLK_IMAGE_FORMAT_NAME_MAX];
  /* EXTENT: FLAT, SPARSE, VMFS, VMFSSPARSE or SESPARSE, its size and
   * (FLAT) where it starts in its file, in 512-byte sectors.
   */
  char type[BLK_EXTENT_TYPE_MAX];
  uint64_t sectors, offset;
  size_t line;                  /* EXTENT: where its line starts in text */
};

struct blk_refs {
  struct blk_ref *refs;
  size_t n;
  /* A vmdk descriptor file: its extents' sizes added up, in bytes,
   * and its text as read (malloc'd, NUL-terminated where qemu's
   * reading ends), so that the very text checked can be handed on.
   */
  bool descriptor;
  uint64_t descriptor_size;
  char *text;
};

/* Read count bytes at offset of the image file into buf; bytes past
 * its end read as zeros (as qemu's file driver gives them).  0, or -1
 * with errno set.
 */
typedef int blk_pread_fn (void *opaque, void *buf, size_t count,
                          uint64_t offset);

/* What the file of size file_size, read as format (lib/imgformat.h's
 * names), names.  Returns 0 with *refs filled in (free it with
 * blk_refs_free), or -1 with why it is refused in why (at most len
 * bytes): qemu would refuse it too (a name too long), or nbdsum does
 * (a vmdk extent qemu skips and serves as nothing, more than
 * BLK_REFS_MAX), or the reader failed (errno then not 0).
 */
extern int blk_image_refs (const char *format, blk_pread_fn *pread,
                           void *opaque, uint64_t file_size,
                           struct blk_refs *refs, char *why, size_t len);
extern void blk_refs_free (struct blk_refs *refs);

/* Does qemu read a backing file's name as a protocol ("nbd:", "http:",
 * "json:", "fat:"): a ':' before any '/'.
 */
extern bool blk_ref_has_protocol (const char *name);

/* A vmdk SPARSE, VMFSSPARSE or SESPARSE extent's first 512 bytes
 * (zero-padded): is it what qemu reads as that type, holding no
 * further descriptor?  NULL, or why not (static).
 */
extern const char *blk_vmdk_sparse_extent_check (const char *type,
                                                 const uint8_t *head);

#endif /* BLKHASH_IMGREFS_H */
