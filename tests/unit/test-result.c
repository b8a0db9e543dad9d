/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* Unit tests: client/result.c, the encoding of a result that a -j job
 * sends its parent: every member comes back, and strings from a pipe
 * stay within their arrays.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "options.h"
#include "result.h"
#include "tap.h"

/* result_json_members reads the options; none here. */
static const struct options no_options;
const struct options *const opts = &no_options;

int
main (void)
{
  struct result in, out;
  unsigned char wire[RESULT_WIRE_SIZE];

  memset (&in, 0, sizeof in);
  in.name = "sender's name";
  strcpy (in.hex, "00ff");
  strcpy (in.digest, "sha512");
  in.block_size = 98304;
  in.size = UINT64_C (1) << 42;
  strcpy (in.method, "client-side");
  strcpy (in.format, "vmdk");
  in.format_given = true;
  in.seconds = 12.5;
  in.incremental = true;
  in.hashed_blocks = 7;
  in.sampled_blocks = 64;
  in.read_bytes = 458752;

  result_encode (&in, wire);
  result_decode (wire, "receiver's name", &out);
  ok (strcmp (out.name, "receiver's name") == 0, "the name is the receiver's");
  ok (strcmp (out.hex, in.hex) == 0, "hex");
  ok (strcmp (out.digest, in.digest) == 0, "digest");
  ok (out.block_size == in.block_size, "block size");
  ok (out.size == in.size, "size");
  ok (strcmp (out.method, in.method) == 0, "method");
  ok (strcmp (out.format, in.format) == 0, "format");
  ok (out.format_given, "format given");
  ok (out.seconds == in.seconds, "seconds");
  ok (out.incremental, "incremental (--since)");
  ok (out.hashed_blocks == 7, "blocks hashed");
  ok (out.sampled_blocks == 64, "blocks sampled");
  ok (out.read_bytes == 458752, "bytes read");
  /* Nothing else: the rest of the struct is as sent. */
  out.name = in.name;
  ok (memcmp (&out, &in, sizeof in) == 0, "every member, byte for byte");

  /* Strings that would run past their arrays end within them. */
  memset (wire, 'x', sizeof wire);
  memcpy (wire + offsetof (struct result, format_given), "\0", 1);
  memcpy (wire + offsetof (struct result, incremental), "\0", 1);
  result_decode (wire, "n", &out);
  ok (strlen (out.hex) == sizeof out.hex - 1 &&
      strlen (out.digest) == sizeof out.digest - 1 &&
      strlen (out.method) == sizeof out.method - 1 &&
      strlen (out.format) == sizeof out.format - 1,
      "unterminated strings are cut at their arrays' ends");
  return done_testing ();
}
