/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* Unit tests: lib/imgformat.c, probing as qemu 7.2 probes.  The heads
 * are written from each block driver's header layout; tests/nbdsum-
 * inputs.bats checks the formats qemu-img can write against qemu-img
 * info itself.
 */
#include <config.h>

#include <string.h>

#include "imgformat.h"
#include "tap.h"

static uint8_t head[BLK_PROBE_HEAD];

static void
clear (void)
{
  memset (head, 0, sizeof head);
}

static void
put (size_t off, const void *bytes, size_t len)
{
  memcpy (head + off, bytes, len);
}

/* Probe head[0..len) with name, no footer: the format, and no other. */
static int
is (const char *format, size_t len, const char *name)
{
  struct blk_probe p;

  blk_probe_image (head, len, name, NULL, &p);
  if (strcmp (p.format, format) != 0 || p.also || p.fixed_vhd ||
      p.encrypted)
    printf ("# probed %s (also %s, fixed VHD %d, encrypted %d), want %s\n",
            p.format, p.also ? p.also : "nothing", p.fixed_vhd, p.encrypted,
            format);
  return strcmp (p.format, format) == 0 && p.also == NULL && !p.fixed_vhd &&
    !p.encrypted;
}

/* Probe head[0..len): format, encrypted. */
static int
encrypted (const char *format, size_t len)
{
  struct blk_probe p;

  blk_probe_image (head, len, "x", NULL, &p);
  return strcmp (p.format, format) == 0 && p.also == NULL && p.encrypted;
}

/* A descriptor text, as the head of a file. */
static int
text_is (const char *format, const char *text)
{
  clear ();
  put (0, text, strlen (text));
  return is (format, strlen (text), "d.vmdk");
}

int
main (void)
{
  static const char cloop[] =
    "#!/bin/sh\n#V2.0 Format\n"
    "modprobe cloop file=$0 && mount -r -t iso9660 /dev/cloop $1\n";
  struct blk_probe p;
  uint8_t footer[BLK_VHD_FOOTER] = { 0 };

  clear ();
  ok (is ("raw", 0, "x"), "an empty file is raw");
  ok (is ("raw", 512, "x"), "zeros are raw");

  put (0, "QFI\xfb\0\0\0\3", 8);
  ok (is ("qcow2", 512, "x"), "qcow2 v3");
  put (0, "QFI\xfb\0\0\0\2", 8);
  ok (is ("qcow2", 8, "x"), "qcow2 v2, a file of 8 bytes (zero-padded)");
  put (0, "QFI\xfb\0\0\0\1", 8);
  ok (is ("qcow", 512, "x"), "qcow (version 1)");
  put (0, "QFI\xfb\0\0\0\0", 8);
  ok (is ("raw", 512, "x"), "the qcow magic with version 0 is raw");
  put (0, "QFI\xfb\0\0\0\1", 8);
  ok (is ("raw", 4, "x"), "a file cut after the magic: its version reads 0");

  /* Encrypted: crypt_method, big-endian, at 32 (qcow2) or 36 (qcow). */
  clear ();
  put (0, "QFI\xfb\0\0\0\3", 8);
  put (32, "\0\0\0\2", 4);
  ok (encrypted ("qcow2", 512), "qcow2 encrypted with luks (crypt_method 2)");
  put (32, "\0\0\0\1", 4);
  ok (encrypted ("qcow2", 512), "qcow2 encrypted with AES (crypt_method 1)");
  put (32, "\1\0\0\0", 4);
  ok (encrypted ("qcow2", 512), "any crypt_method but 0 (big-endian)");
  ok (is ("qcow2", 32, "x"), "a qcow2 file cut before crypt_method: plain");
  put (32, "\0\0\0\0", 4);
  put (36, "\0\0\0\1", 4);
  ok (is ("qcow2", 512, "x"), "qcow2 reads crypt_method at 32, not 36");
  clear ();
  put (0, "QFI\xfb\0\0\0\1", 8);
  put (36, "\0\0\0\1", 4);
  ok (encrypted ("qcow", 512), "qcow encrypted with AES (crypt_method 1)");
  put (36, "\0\0\0\0", 4);
  put (32, "\x0c\x09\0\0", 4);
  ok (is ("qcow", 512, "x"), "qcow's cluster and L2 bits at 32 are no cipher");
  clear ();
  put (32, "\0\0\0\2", 4);
  ok (is ("raw", 512, "x"), "a raw file is never encrypted");

  clear ();
  put (0, "QED", 4);
  ok (is ("qed", 512, "x"), "qed");
  put (0, "QEDx", 4);
  ok (is ("raw", 512, "x"), "QED without its NUL is raw");

  clear ();
  put (0, "KDMV", 4);
  ok (is ("vmdk", 512, "x"), "vmdk sparse extent (KDMV)");
  put (0, "COWD", 4);
  ok (is ("vmdk", 512, "x"), "vmdk 3 (COWD)");
  put (0, "VMDK", 4);
  ok (is ("raw", 512, "x"), "VMDK is no magic");

  ok (text_is ("vmdk", "# Disk DescriptorFile\nversion=1\nCID=1\n"),
      "a vmdk descriptor");
  ok (text_is ("vmdk", "version=2\n"), "version=2 first");
  ok (text_is ("vmdk", "version=3\r\n"), "version=3, CRLF");
  ok (text_is ("vmdk", "#a\n#b\n   \n \r\nversion=1\n"),
      "after comments and lines of spaces (CRLF too)");
  ok (text_is ("raw", "version=4\n"), "version=4 is not one");
  ok (text_is ("raw", "\nversion=1\n"), "an empty line first is not blank");
  ok (text_is ("raw", " x\nversion=1\n"), "nor a line with more than spaces");
  ok (text_is ("raw", "\tversion=1\n"), "nor a tab");
  ok (text_is ("raw", "version=1"), "version=1 without its newline");
  ok (text_is ("raw", "VERSION=1\n"), "the case counts");
  {
    /* A comment running to the end of the 512 bytes. */
    char text[BLK_PROBE_HEAD + 1];
    memset (text, 'c', BLK_PROBE_HEAD);
    text[0] = '#';
    text[BLK_PROBE_HEAD] = '\0';
    ok (text_is ("raw", text), "a comment filling the 512 bytes");
    /* Blank lines up to the last bytes: the version line cut off. */
    memset (text, ' ', BLK_PROBE_HEAD);
    for (size_t i = 9; i < 500; i += 10)
      text[i] = '\n';
    memcpy (text + 500, "version=1\n", 10);
    text[510] = '\0';
    ok (text_is ("vmdk", text), "the version line ending at byte 510");
    text[509] = 'x';
    ok (text_is ("raw", text), "... not at 509 without its newline");
  }

  clear ();
  put (0, "vhdxfile", 8);
  ok (is ("vhdx", 512, "x"), "vhdx");
  clear ();
  put (0, "conectix", 8);
  ok (is ("vpc", 512, "x"), "vpc (dynamic: the footer's copy at 0)");

  clear ();
  put (0, "<<< Oracle VM VirtualBox Disk Image >>>\n", 40);
  put (64, "\x7f\x10\xda\xbe", 4);
  ok (is ("vdi", 512, "x"), "vdi by its signature at 64");
  put (64, "\xbe\xda\x10\x7f", 4);
  ok (is ("raw", 512, "x"), "vdi's signature big-endian is not it");

  clear ();
  put (0, "WithoutFreeSpace\2\0\0\0", 20);
  ok (is ("parallels", 512, "x"), "parallels");
  put (0, "WithouFreSpacExt\2\0\0\0", 20);
  ok (is ("parallels", 512, "x"), "parallels, the other magic");
  put (0, "WithouFreSpacExt\3\0\0\0", 20);
  ok (is ("raw", 512, "x"), "parallels version 3 is not");

  clear ();
  put (0, "Bochs Virtual HD Image", 22);
  put (32, "Redolog", 7);
  put (48, "Growing", 7);
  put (64, "\0\0\2\0", 4);
  ok (is ("bochs", 512, "x"), "bochs v2");
  put (64, "\0\0\1\0", 4);
  ok (is ("bochs", 512, "x"), "bochs v1");
  put (48, "Growing!", 8);
  ok (is ("raw", 512, "x"), "bochs: fields are NUL-terminated strings");

  clear ();
  put (0, cloop, strlen (cloop));
  ok (is ("cloop", 512, "x"), "cloop's script");
  clear ();
  put (0, cloop, strlen (cloop) - 1);
  ok (is ("raw", 512, "x"), "cloop's script cut short");

  clear ();
  ok (is ("dmg", 512, "disk.dmg"), "dmg by its name");
  ok (is ("raw", 512, ".dmg"), "not a name that is only .dmg");
  ok (is ("raw", 512, "disk.DMG"), "nor .DMG");
  ok (is ("raw", 512, NULL), "nor without a name (a stream)");
  put (0, "QFI\xfb\0\0\0\3", 8);
  ok (is ("qcow2", 512, "disk.dmg"), "a magic wins over the name");

  clear ();
  put (0, "LUKS\xba\xbe\0\1", 8);
  ok (is ("luks", 512, "x"), "luks (version 1)");
  put (0, "LUKS\xba\xbe\0\2", 8);
  ok (is ("raw", 512, "x"), "LUKS2 is raw to qemu");

  /* Two magics at once: both said. */
  clear ();
  put (0, "QFI\xfb\0\0\0\3", 8);
  put (64, "\x7f\x10\xda\xbe", 4);
  blk_probe_image (head, 512, "x", NULL, &p);
  ok (strcmp (p.format, "qcow2") == 0 && p.also &&
      strcmp (p.also, "vdi") == 0, "qcow2 and vdi at once: ambiguous");
  clear ();
  put (0, cloop, strlen (cloop));
  blk_probe_image (head, 512, "x.dmg", NULL, &p);
  ok (strcmp (p.format, "cloop") == 0 && p.also &&
      strcmp (p.also, "dmg") == 0, "cloop's script in x.dmg: ambiguous");

  /* A fixed VHD: raw, with the cookie in the footer. */
  clear ();
  memcpy (footer, "conectix", 8);
  blk_probe_image (head, 512, "x", footer, &p);
  ok (strcmp (p.format, "raw") == 0 && p.fixed_vhd, "a fixed-size VHD");
  put (0, "KDMV", 4);
  blk_probe_image (head, 512, "x", footer, &p);
  ok (strcmp (p.format, "vmdk") == 0 && !p.fixed_vhd,
      "the footer only counts for raw");
  memcpy (footer, "conectiX", 8);
  clear ();
  blk_probe_image (head, 512, "x", footer, &p);
  ok (!p.fixed_vhd, "no cookie, no VHD");

  ok (blk_image_format ("QCOW2") == blk_image_formats[1] &&
      strcmp (blk_image_format ("Parallels"), "parallels") == 0,
      "names in any case, canonical");
  ok (blk_image_format ("luks") == NULL && blk_image_format ("auto") == NULL
      && blk_image_format ("") == NULL && blk_image_format ("qcow22") == NULL
      && blk_image_format_n ("qcow22", 5) == blk_image_formats[1]
      && strcmp (blk_image_format_n ("qcow22", 4), "qcow") == 0,
      "luks, auto and others are not formats nbdsum reads");
  return done_testing ();
}
