# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
"""What the campaign's case phases (tests/campaign_hostile.py and
tests/campaign_word.py) share: each case is one family of the phase's
list, in an order shuffled per cycle from the seed, with its own
random stream and directory; a case's failures carry the phase's tags
and the command that replays that one case."""

import os
import random
import shutil
import time
import traceback


class SetupFailed(Exception):
    """A case could not set itself up: a skip, not a failure."""


class Phase:
    # Set by each phase: its name (in seeds, tags, touch and op names:
    # changing it changes every case a seed draws), its families, and
    # the options that replay one case (formatted with seed, small, i).
    name = None
    families = ()
    replay = None

    def family_of(self, i):
        cycle, pos = divmod(i, len(self.families))
        order = list(self.families)
        random.Random("%s-order:%d:%d" % (self.name, self.c.seed, cycle)) \
            .shuffle(order)
        return order[pos]

    def run_case(self, i, op, body, dirs=()):
        """Case i as operation op: body() in self.dir (and dirs, made
        first), its failures tagged; the directories go if it passed."""
        c = self.c
        fam = self.family_of(i)
        c.cur_cmds, c.cur_touch = [], {"%s-c%d" % (self.name, i)}
        c.op = op
        self.i, self.fam = i, fam
        self.rng = random.Random("%s:%d:%d" % (self.name, c.seed, i))
        self.dir = os.path.join(self.root, "c%d" % i)
        for d in (self.dir,) + tuple(dirs):
            os.makedirs(d)
        self.n = 0
        nfail = len(c.failures)
        t0 = time.monotonic()
        self.stats[fam]["cases"] += 1
        try:
            body()
        except SetupFailed as e:
            c.skip("%s %s: setup failed (%s)" % (self.name, fam, e))
        except Exception:
            c.fail("campaign-error", "%s %s: %s" % (
                self.name, fam, traceback.format_exc()[-800:]))
        for f in c.failures[nfail:]:
            f["tags"] = [self.name, fam] + list(f.get("tags", ()))
            f["msg"] += " [replay: tests/campaign.py " + self.replay % (
                c.seed, " --small" if c.args.small else "", i) + "]"
        self.stats[fam]["failures"] += len(c.failures) - nfail
        c.end_op("%s:%s" % (self.name, fam), t0, case=i)
        if not c.failures[nfail:]:
            for d in (self.dir,) + tuple(dirs):
                shutil.rmtree(d, ignore_errors=True)
