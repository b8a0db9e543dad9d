/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: MIN and MAX, in the spirit of nbdkit's
 * common/include/minmax.h (which nbdkit does not install).
 */
#ifndef BLKHASH_MINMAX_H
#define BLKHASH_MINMAX_H

/* Type-checked, evaluating each argument once. */
#define MIN(a, b) BLK_MINMAX (<, a, b, __COUNTER__)
#define MAX(a, b) BLK_MINMAX (>, a, b, __COUNTER__)
#define BLK_MINMAX(op, a, b, n) BLK_MINMAX2 (op, a, b, n)
#define BLK_MINMAX2(op, a, b, n)                                        \
  ({                                                                    \
    __auto_type _a##n = (a);                                            \
    __auto_type _b##n = (b);                                            \
    (void) (&_a##n == &_b##n);  /* same type, or a warning */           \
    _a##n op _b##n ? _a##n : _b##n;                                     \
  })

#endif /* BLKHASH_MINMAX_H */
