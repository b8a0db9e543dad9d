/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: the command line, parsed once and read-only afterwards, and
 * what the rest takes from it: how an input is hashed (a hash spec and
 * its defaults), the size limit and its refusal, and how manifests are
 * read.
 */
#ifndef NBDSUM_OPTIONS_H
#define NBDSUM_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "util.h"

#define MAX_CONNECTIONS 64
#define MAX_REQUESTS 1024
#define MAX_CONNECT_TIMEOUT 86400
#define MAX_JOBS 1024
#define SPOT_CHECK_DEFAULT 16
#define MAX_SPOT_CHECK 65536

struct options {
  unsigned connections;         /* -C, default 4 */
  unsigned requests;            /* -R, default 16 */
  double connect_timeout;       /* --connect-timeout, seconds; 0: none */
  double reply_timeout;         /* --reply-timeout, seconds; 0: none */
  const char *digest;           /* -d, NULL: the server's default */
  bool plain;                   /* --plain: digests of the bytes */
  const char *plain_digest;     /* --plain=ALG, canonical; sha256 */
  uint64_t block_size;          /* --block-size, 0: the server's default */
  bool client_side;             /* --client-side */
  struct blk_range range;       /* --range=OFFSET+LENGTH; length 0: none */
  unsigned spot_check;          /* --spot-check=N, 0: --no-spot-check */
  bool allow_backing;           /* --allow-backing: files anywhere */
  bool json;                    /* --json */
  enum {
    TAG_AUTO,                   /* tagged unless sha256 and 64K */
    TAG_ALWAYS,                 /* --tag */
    TAG_NEVER,                  /* --untagged */
  } tag;
  bool zero;                    /* -z: lines end with NUL, no escapes */
  bool progress_bar;            /* -p on a terminal */
  bool progress_lines;          /* -p elsewhere: a line now and then */
  int progress_fd;              /* --progress=FD, or -1 */
  bool check;                   /* -c: the arguments are checksum files */
  bool quiet;                   /* -q: no notices; with -c no OK lines */
  bool status;                  /* with --check */
  bool no_names;                /* --no-names: checksums alone */
  bool verbose;                 /* -v: libnbd's debug messages */
  bool ignore_missing, strict, warn;    /* with --check */
  bool diff;                    /* --diff A B */
  const char *manifest;         /* --diff --manifest=FILE B */
  bool blocks;                  /* --blocks */
  bool bmap;                    /* --bmap */
  const char *since;            /* --since=MANIFEST URI */
  const char *dirty_bitmap;     /* --dirty-bitmap=NAME, with --since */
  bool immutable_backing;       /* --immutable-backing, with --since */
  bool check_manifest;          /* --check-manifest FILE... */
  unsigned jobs;                /* -j: inputs hashed at once, default 1 */
  uint64_t max_size;            /* --max-size, if max_size_given; 0: none */
  bool max_size_given;
  const char *const *http_headers;      /* --http-header, in order */
  unsigned nhttp_headers;
  bool http_insecure;           /* --http-insecure: curl's sslverify=false */
  unsigned http_timeout;        /* --http-timeout: curl's timeout=; 0: none */
  bool http_timeout_given;
};

/* Set by parse_options, before anything else runs. */
extern const struct options *const opts;

/* How one input is hashed: the options' -d and --block-size, except
 * for --diff's image B, hashed like A.  NULL and 0 mean the server's
 * choice server-side, the defaults client-side.  format is a checksum
 * line's, for its local file (lib/imgformat.h's names); NULL: the
 * command line's for the input (options_format), else probed.
 */
struct hash_spec {
  const char *digest;
  uint64_t block_size;
  const char *format;
  /* A plain digest of the bytes (digest never NULL, block_size 0),
   * not a blkhash checksum.
   */
  bool plain;
  /* Of these bytes only, as an image of their own (--range, a
   * line's); length 0: the whole image.  Only the server's filter
   * hashes part of an image.
   */
  struct blk_range range;
};
/* spec with what it leaves open filled with the defaults (sha256,
 * 64K): how nbdsum hashes where no server chooses.  The format is
 * left as it is.
 */
extern struct hash_spec hash_spec_or_defaults (const struct hash_spec *spec);

/* The largest image nbdsum hashes (--max-size, else the default for a
 * plain digest or a blkhash checksum); UINT64_MAX for no limit.
 */
extern uint64_t options_max_size (bool plain);
/* Is size, of the input name, over the limit (options_max_size) for
 * a plain digest (block_size 0) or a blkhash checksum in blocks of
 * block_size with digests of digest_len bytes (lib's blk_work_size)?
 * Then say so, what ("the image is") saying whose size it is.
 */
extern bool size_refused (const char *name, const char *what, uint64_t size,
                          uint64_t block_size, uint32_t digest_len);
/* How a refusal by size ends: the option that lifts the limit. */
#define SIZE_LIFTS "--max-size=SIZE lifts it (0: no limit)"

/* How nbdsum has manifests read (manifest.h): errors said on
 * standard error, stopped by a signal, copied to $TMPDIR, the image
 * they describe within --max-size.
 */
struct manifest_env;
extern const struct manifest_env *manifest_env (void);

/* Parse argv (exits on errors, --help, --version, --list-digests);
 * *first_arg is the first input.
 */
extern void parse_options (int argc, char **argv, int *first_arg);

/* The format --format gave the input named name (by its address in
 * argv, as parse_options left it), by lib/imgformat.h's static name;
 * NULL when none did (--format=auto, or none before it): probe.
 */
extern const char *options_format (const char *name);

#endif /* NBDSUM_OPTIONS_H */
