/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* Unit tests: lib/imgrefs.c, the names in an image's headers, from
 * images written here byte by byte after each qemu driver's layout.
 * tests/nbdsum-hostile-images.bats checks images qemu-img writes, and
 * that qemu-img info reads the same names.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "imgrefs.h"
#include "tap.h"

static uint8_t img[256 * 1024];
static size_t img_len;

static int
mem_pread (void *opaque, void *buf, size_t count, uint64_t offset)
{
  size_t n = offset < img_len ? img_len - offset : 0;

  if (n > count)
    n = count;
  memcpy (buf, img + offset, n);
  memset ((uint8_t *) buf + n, 0, count - n);
  return 0;
}

static void
clear (size_t len)
{
  memset (img, 0, sizeof img);
  img_len = len;
}

static void
put (size_t off, const void *bytes, size_t len)
{
  memcpy (img + off, bytes, len);
}

static void
put_be32 (size_t off, uint32_t v)
{
  const uint8_t b[4] = { v >> 24, v >> 16, v >> 8, v };
  put (off, b, 4);
}

static void
put_be64 (size_t off, uint64_t v)
{
  put_be32 (off, v >> 32);
  put_be32 (off + 4, v);
}

static void
put_le32 (size_t off, uint32_t v)
{
  const uint8_t b[4] = { v, v >> 8, v >> 16, v >> 24 };
  put (off, b, 4);
}

static char why[256];

static int
refs_of (const char *format, struct blk_refs *r)
{
  return blk_image_refs (format, mem_pread, NULL, img_len, r, why,
                         sizeof why);
}

/* A qcow2 v3 header: 64K clusters, 104 bytes. */
static void
qcow2 (void)
{
  clear (65536);
  put_be32 (0, 0x514649fb);
  put_be32 (4, 3);
  put_be32 (20, 16);
  put_be32 (100, 104);
}

static void
test_qcow2 (void)
{
  struct blk_refs r;

  qcow2 ();
  ok (refs_of ("qcow2", &r) == 0 && r.n == 0, "qcow2: no names");
  blk_refs_free (&r);

  /* Backing file with its format in an extension. */
  put_be64 (8, 4096);
  put_be32 (16, 8);
  put (4096, "base.raw", 8);
  put_be32 (104, 0xe2792aca);
  put_be32 (108, 3);
  put (112, "raw", 3);
  ok (refs_of ("qcow2", &r) == 0 && r.n == 1 &&
      r.refs[0].kind == BLK_REF_BACKING &&
      strcmp (r.refs[0].name, "base.raw") == 0 &&
      strcmp (r.refs[0].format, "raw") == 0,
      "qcow2: the backing file and its format");
  blk_refs_free (&r);

  /* A name cut at a NUL, as qemu's C string. */
  put (4096, "ab\0cdefg", 8);
  ok (refs_of ("qcow2", &r) == 0 && r.n == 1 &&
      strcmp (r.refs[0].name, "ab") == 0, "qcow2: a name ends at a NUL");
  blk_refs_free (&r);

  /* The data file counts only with the incompatible feature bit. */
  put (4096, "base.raw", 8);
  put_be32 (120, 0x44415441);
  put_be32 (124, 9);
  put (128, "data.file", 9);
  ok (refs_of ("qcow2", &r) == 0 && r.n == 1,
      "qcow2: a data file name without its feature bit is not opened");
  blk_refs_free (&r);
  put_be64 (72, 4);
  ok (refs_of ("qcow2", &r) == 0 && r.n == 2 &&
      r.refs[0].kind == BLK_REF_DATA_FILE &&
      strcmp (r.refs[0].name, "data.file") == 0,
      "qcow2: the data file with its feature bit");
  blk_refs_free (&r);

  /* What qemu refuses names nothing. */
  put_be32 (16, 2000);
  ok (refs_of ("qcow2", &r) == 0 && r.n == 1 &&
      r.refs[0].kind == BLK_REF_DATA_FILE,
      "qcow2: a backing name longer than 1023 bytes is qemu's refusal");
  blk_refs_free (&r);
  put_be32 (4, 7);
  ok (refs_of ("qcow2", &r) == 0 && r.n == 0, "qcow2: version 7: none");
  blk_refs_free (&r);

  /* A protocol, read as a name all the same. */
  qcow2 ();
  put_be64 (8, 512);
  put_be32 (16, 22);
  put (512, "nbd://127.0.0.1:1/disk", 22);
  ok (refs_of ("qcow2", &r) == 0 && r.n == 1 &&
      blk_ref_has_protocol (r.refs[0].name), "qcow2: a protocol name");
  blk_refs_free (&r);
  ok (blk_ref_has_protocol ("json:{}") && blk_ref_has_protocol ("fat:/x") &&
      !blk_ref_has_protocol ("./nbd:x") && !blk_ref_has_protocol ("/a:b") &&
      !blk_ref_has_protocol ("base.qcow2"), "protocols as qemu reads them");
}

static void
test_qcow_qed (void)
{
  struct blk_refs r;

  clear (4096);
  put_be32 (0, 0x514649fb);
  put_be32 (4, 1);
  put_be64 (8, 1024);
  put_be32 (16, 11);
  put (1024, "/etc/shadow", 11);
  ok (refs_of ("qcow", &r) == 0 && r.n == 1 &&
      strcmp (r.refs[0].name, "/etc/shadow") == 0 && r.refs[0].format[0] == 0,
      "qcow: the backing file, no format");
  blk_refs_free (&r);

  clear (65536);
  put (0, "QED", 4);
  put_le32 (4, 65536);
  put_le32 (8, 4);
  put_le32 (12, 1);
  put_le32 (16, 1 | 4);
  put_le32 (56, 4096);
  put_le32 (60, 4);
  put (4096, "base", 4);
  ok (refs_of ("qed", &r) == 0 && r.n == 1 &&
      strcmp (r.refs[0].name, "base") == 0 &&
      strcmp (r.refs[0].format, "raw") == 0,
      "qed: the backing file, raw by its no-probe flag");
  blk_refs_free (&r);
  put_le32 (16, 0);
  ok (refs_of ("qed", &r) == 0 && r.n == 0, "qed: no backing flag, none");
  blk_refs_free (&r);
}

static void
descriptor (const char *text)
{
  clear (strlen (text));
  put (0, text, strlen (text));
}

#define HEAD "# Disk DescriptorFile\nversion=1\nCID=1\nparentCID=ffffffff\n"

static void
test_vmdk (void)
{
  struct blk_refs r;

  descriptor (HEAD "createType=\"monolithicFlat\"\n"
              "RW 2048 FLAT \"m-flat.vmdk\" 0\n# The Disk Data Base\n"
              "ddb.adapterType = \"ide\"\n");
  ok (refs_of ("vmdk", &r) == 0 && r.n == 1 && r.descriptor &&
      r.descriptor_size == 2048 * 512 &&
      strcmp (r.refs[0].name, "m-flat.vmdk") == 0 &&
      strcmp (r.refs[0].type, "FLAT") == 0, "vmdk: a flat extent");
  blk_refs_free (&r);

  descriptor (HEAD "createType=\"twoGbMaxExtentSparse\"\n"
              "RW 100 SPARSE \"a.vmdk\"\r\nRW 28 SPARSE \"/abs/b.vmdk\"\r\n"
              "parentFileNameHint=\"parent.vmdk\"\n");
  ok (refs_of ("vmdk", &r) == 0 && r.n == 3 &&
      r.descriptor_size == 128 * 512 &&
      strcmp (r.refs[1].name, "/abs/b.vmdk") == 0 &&
      r.refs[2].kind == BLK_REF_BACKING &&
      strcmp (r.refs[2].name, "parent.vmdk") == 0 &&
      strcmp (r.refs[2].format, "vmdk") == 0,
      "vmdk: sparse extents with CRLF, and its parent");
  blk_refs_free (&r);

  descriptor (HEAD "createType=\"monolithicFlat\"\n"
              "RDONLY 2048 FLAT \"m-flat.vmdk\" 0\n");
  ok (refs_of ("vmdk", &r) == -1 && strstr (why, "RDONLY 2048"),
      "vmdk: a read-only extent is refused (%s)", why);
  descriptor (HEAD "createType=\"monolithicFlat\"\n"
              "RW 2048 FLAT \"m-flat.vmdk\" 0\nRW 2048 ZERO\n");
  ok (refs_of ("vmdk", &r) == -1 && strstr (why, "ZERO"),
      "vmdk: a zero extent is refused (%s)", why);
  descriptor (HEAD "createType=\"monolithicFlat\"\n\n"
              "RW 2048 FLAT \"m-flat.vmdk\" 0\n");
  ok (refs_of ("vmdk", &r) == -1 && strstr (why, "across a line break"),
      "vmdk: a blank line before an extent is refused (%s)", why);
  descriptor (HEAD "createType=\"monolithicFlat\"\n");
  ok (refs_of ("vmdk", &r) == -1 && strstr (why, "no extent"),
      "vmdk: no extent is refused (%s)", why);
  descriptor (HEAD "createType=\"streamOptimized\"\n"
              "RW 2048 FLAT \"/etc/passwd\" 0\n");
  ok (refs_of ("vmdk", &r) == 0 && r.n == 0,
      "vmdk: a createType qemu refuses names nothing");
  blk_refs_free (&r);
  descriptor (HEAD "createType=\"monolithicFlat\"\n"
              "RW 2048 FLAT \"m-flat.vmdk\"\n");
  ok (refs_of ("vmdk", &r) == 0 && r.n == 0,
      "vmdk: an invalid extent line is qemu's refusal");
  blk_refs_free (&r);

  /* A sparse file: its parent in the embedded descriptor. */
  clear (65536);
  put (0, "KDMV", 4);
  put_le32 (12, 2048);
  put (0x200, "# x\nparentFileNameHint=\"../up.vmdk\"\n", 36);
  ok (refs_of ("vmdk", &r) == 0 && r.n == 1 && !r.descriptor &&
      strcmp (r.refs[0].name, "../up.vmdk") == 0,
      "vmdk: a sparse file's parent");
  blk_refs_free (&r);
  put_le32 (12, 0);
  put_le32 (28, 1);
  ok (refs_of ("vmdk", &r) == -1, "vmdk: a sparse header holding a "
      "descriptor is refused (%s)", why);
  ok (blk_vmdk_sparse_extent_check ("SPARSE", img) != NULL &&
      blk_vmdk_sparse_extent_check ("SESPARSE", img) != NULL,
      "vmdk: such an extent is refused");
  put_le32 (12, 2048);
  ok (blk_vmdk_sparse_extent_check ("SPARSE", img) == NULL,
      "vmdk: a sparse extent");
}

int
main (void)
{
  struct blk_refs r;

  test_qcow2 ();
  test_qcow_qed ();
  test_vmdk ();
  clear (512);
  ok (refs_of ("vpc", &r) == 0 && r.n == 0, "vpc names nothing");
  return done_testing ();
}
