/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum --check-manifest FILE...: is each saved manifest whole, and
 * do its block digests give the checksum it carries?  The checks are
 * the manifest reader's (manifest.h); this prints sha256sum -c's
 * verdicts on them.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>

#include "helpers.h"
#include "manifest.h"
#include "messages.h"
#include "modes.h"
#include "options.h"
#include "signals.h"
#include "sumline.h"

int
mode_check_manifest (char **args, int nargs, const struct hash_spec *spec)
{
  unsigned failed = 0;

  (void) spec;
  for (int i = 0; i < nargs && !stop_signal (); i++) {
    struct manifest *m = manifest_open (args[i], manifest_env ());
    uint8_t root[BLK_DIGEST_MAX];
    bool ok = m != NULL;

    if (m && !manifest_root (m, root)) {
      error_at (args[i], "it carries no checksum (an older nbdsum --blocks "
                "wrote it): its form is right, its digests cannot be "
                "verified");
      ok = false;
    }
    manifest_close (m);
    if (stop_signal ())
      break;
    if (!ok)
      failed++;
    if (!ok || !opts->quiet) {
      blk_fput_verdict (stdout, args[i], ok ? "OK" : "FAILED");
      stdout_flush ();
    }
  }
  if (failed && !stop_signal ())
    fprintf (stderr, "%s: WARNING: %u of %d manifest%s did not verify\n",
             progname, failed, nargs, nargs == 1 ? "" : "s");
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
