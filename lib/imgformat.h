/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: disk image formats, by the names qemu gives them,
 * and what a file's first bytes say it is, read as qemu 7.2 probes
 * them (each block driver's probe function; block.c's
 * find_image_format gives them the first 512 bytes, zero-padded).
 *
 * nbdsum reads a local file as the guest sees it: raw files are their
 * bytes, the formats of blk_image_formats go through qemu-nbd, and
 * luks and encrypted qcow2 and qcow images are refused.  Checksum
 * lines name a format given on the command line (lib/sumline.c).
 */
#ifndef BLKHASH_IMGFORMAT_H
#define BLKHASH_IMGFORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The bytes qemu probes, from the start of the file. */
#define BLK_PROBE_HEAD 512
/* A VHD footer: the last 512 bytes of a fixed-size VHD. */
#define BLK_VHD_FOOTER 512
/* Longer than any format name. */
#define BLK_IMAGE_FORMAT_NAME_MAX 16

/* The formats nbdsum reads, "raw" first, then those it reads through
 * qemu-nbd; NULL ends the list.
 */
extern const char *const blk_image_formats[];
/* Those names, ", " between them, for messages. */
#define BLK_IMAGE_FORMATS_LIST \
  "raw, qcow2, qcow, qed, vmdk, vhdx, vpc, vdi, parallels, bochs, cloop, dmg"

/* The canonical (lower-case, static) name of format name, spelt in
 * any case, if nbdsum reads it; else NULL (luks, auto, unknown).
 */
extern const char *blk_image_format (const char *name);
extern const char *blk_image_format_n (const char *name, size_t len);

/* What a file's bytes say it is. */
struct blk_probe {
  /* As qemu probes it: "raw" or a format's name ("luks" included),
   * static.
   */
  const char *format;
  /* Another format that probes as surely: a file made to look like
   * two (qemu takes one of them by the order it registered its
   * drivers in); NULL otherwise.
   */
  const char *also;
  /* Raw to qemu, but the last 512 bytes start with a VHD footer's
   * cookie: almost surely a fixed-size VHD.
   */
  bool fixed_vhd;
  /* A qcow2 or qcow image whose header names a cipher (crypt_method
   * not 0: AES or luks): its guest content needs the secret.
   */
  bool encrypted;
};

/* Probe a file from head, its first len bytes (all of them when the
 * file is shorter than BLK_PROBE_HEAD; an empty file is raw), its
 * name (or NULL: dmg is probed by name alone, as qemu does) and
 * footer, its last BLK_VHD_FOOTER bytes (NULL when it is shorter).
 */
extern void blk_probe_image (const uint8_t *head, size_t len,
                             const char *name, const uint8_t *footer,
                             struct blk_probe *p);

#endif /* BLKHASH_IMGFORMAT_H */
