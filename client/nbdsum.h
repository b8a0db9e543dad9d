/* nbdsum: blkhash checksums of disk images, computed by the server
 * when it runs nbdkit's blkhash filter, by the client otherwise.
 */
#ifndef NBDSUM_H
#define NBDSUM_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <libnbd.h>

#include "blkhash.h"
#include "header.h"
#include "table.h"

#define MAX_CONNECTIONS 64
#define MAX_REQUESTS 1024

struct options {
  unsigned connections;         /* -C, default 4 */
  unsigned requests;            /* -R, default 16 */
  const char *digest;           /* -d, NULL: the server's default */
  uint64_t block_size;          /* --block-size, 0: the server's default */
  const char *format;           /* --format for local files, NULL: probe */
  bool client_side;             /* --client-side */
  bool json;                    /* --json */
  bool progress_bar;            /* -p on a terminal */
  int progress_fd;              /* --progress=FD, or -1 */
  const char *check;            /* -c FILE */
  bool quiet, status;           /* with --check */
  bool diff;                    /* --diff A B */
  bool blocks;                  /* --blocks */
};

extern struct options opts;
extern const char *progname;

/* Print "nbdsum: NAME: message" on stderr. */
extern void error_at (const char *name, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));

/* nbdsum.c: SIGHUP, SIGINT, SIGPIPE and SIGTERM only record the
 * signal and make a pipe readable to wake the poll loops.  nbdsum then
 * issues no new requests, lets those in flight finish, disconnects,
 * stops its private servers and dies of the signal: nbdkit 1.32 aborts
 * when a client vanishes with requests in flight.
 */
/* The signal caught, or 0. */
extern int stop_signal (void);
/* Readable once a signal was caught (-1 before they are handled). */
extern int stop_fd (void);
/* Block the handled signals in this thread (to create threads or
 * processes that must not run the handler), and restore the mask.
 */
extern void stop_signals_block (sigset_t *saved);
extern void stop_signals_restore (const sigset_t *saved);
/* In a child about to exec: the default actions again. */
extern void stop_signals_default (void);

/* options.c */
extern void parse_options (int argc, char **argv, int *first_arg);

/* local.c: a private nbdkit serving a local file or stdin-less image,
 * reached through a Unix socket it inherits (socket activation).
 */
struct local_server;
extern bool is_uri (const char *arg);
extern struct local_server *local_server_start (const char *name,
                                                const char *path);
extern const char *local_server_uri (const struct local_server *s);
/* Has the private nbdkit exited (for a clearer error)? */
extern bool local_server_exited (struct local_server *s);
/* Kill it at once, before closing connections that still have requests
 * in flight: a dead server cannot trip over them.
 */
extern void local_server_kill (struct local_server *s);
/* Stop it (SIGTERM, SIGKILL if it lingers) and remove its socket. */
extern void local_server_stop (struct local_server *s);

/* progress.c */
struct progress {
  const char *name;
  uint64_t total;               /* image bytes */
  atomic_uint_fast64_t done;
  double start;
  int last_percent;
};
extern double now (void);
extern void progress_init (struct progress *p, const char *name,
                           uint64_t total);
extern void progress_update (struct progress *p, bool final);

/* One input being hashed: its connections and the method. */
struct endpoint;

struct method_ops {
  const char *name;             /* "server-side" or "client-side" */
  /* Connect and set up: 1 when ready, 0 when this method cannot serve
   * the input (the server has no blkhash view), -1 on error (printed).
   */
  int (*open) (struct endpoint *ep);
  void (*close) (struct endpoint *ep);
  /* Hash the whole image; the root in root. */
  int (*checksum) (struct endpoint *ep, uint8_t *root);
  /* After checksum: digests of blocks [first, first+count). */
  int (*digests) (struct endpoint *ep, uint64_t first, uint64_t count,
                  uint8_t *out);
  /* Issue more requests on connection i (up to the in-flight limit).
   * Returns 1 if it issued some, 0 when there is nothing left, -1 on
   * error (after failing the endpoint).
   */
  int (*refill) (struct endpoint *ep, unsigned i);
};

struct conn {
  struct endpoint *ep;
  unsigned index;
  struct nbd_handle *h;
  unsigned in_flight;
  pthread_t thread;
  void *priv;                   /* the method's per-connection state */
};

struct endpoint {
  const char *name;             /* as given on the command line */
  struct local_server *server;  /* private nbdkit, or NULL */
  char *uri;
  const struct method_ops *ops;
  struct conn conns[MAX_CONNECTIONS];
  unsigned nconns;
  unsigned requests;            /* in flight per connection */

  /* The digest and block size in use: points to own_params once it is
   * initialised (from the view header, or from the options).
   */
  const struct blk_params *params;
  struct blk_params own_params;
  uint64_t size, nblocks;

  struct blk_header hdr;        /* server-side */
  char *base_name, *view_name;
  struct nbd_handle *negotiating;       /* the view was refused: this
                                           handle can still opt_go */
  struct blk_table *table;      /* client-side */
  void *priv;

  struct progress progress;
  atomic_bool failed;
  pthread_mutex_t lock;         /* first_error */
  char *first_error;
};

extern const struct method_ops server_side_ops, client_side_ops;

/* An asynchronous request on blocks [first, first+count), freed by
 * request_free when libnbd retires it.
 */
struct request {
  struct endpoint *ep;
  struct conn *c;
  uint64_t first, count;
  uint8_t *buf;                 /* read requests only */
};
extern struct request *request_new (struct conn *c, uint64_t first,
                                    uint64_t count, size_t buf_size);
extern void request_free (void *opaque);

/* endpoint.c */
/* Is name the URI of a blkhash view rather than of an image?  Then say
 * so, and which URI to give instead.  Views are never hashed: the
 * server side would hash the view's image, the client side the view's
 * bytes.
 */
extern bool refuse_view (const char *name);
extern struct endpoint *endpoint_open (const char *name);
extern void endpoint_close (struct endpoint *ep);
extern void endpoint_fail (struct endpoint *ep, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));
/* Connect to ep->uri, export name export_name (NULL: the URI's).  The
 * handle is left in option mode when go is false.
 */
extern struct nbd_handle *endpoint_connect (struct endpoint *ep,
                                            const char *export_name,
                                            bool go);
/* Open connections 1..C-1 (C if the server allows multi-conn). */
extern int endpoint_connect_rest (struct endpoint *ep,
                                  const char *export_name);
/* Run the method's refill/poll loop on every connection until done,
 * updating progress.  Returns 0 or -1 (error printed).
 */
extern int endpoint_run (struct endpoint *ep);

/* stream.c: blkhash of a byte stream (stdin); p is initialised from
 * the options and must be freed by the caller on success.
 */
extern int stream_checksum (const char *name, int fd, uint8_t *root,
                            uint64_t *size, struct blk_params *p);

/* Output of one checksum (nbdsum.c). */
struct result {
  const char *name;
  char hex[2 * EVP_MAX_MD_SIZE + 1];
  char digest[BLK_DIGEST_NAME_MAX + 1];
  uint32_t block_size;
  uint64_t size;
  const char *method;           /* server-side, client-side, stream */
  double seconds;
};

/* Compute the checksum of one input.  0 or -1 (error printed). */
extern int checksum_one (const char *name, struct result *res);

/* check.c: --check.  Returns the exit status. */
extern int check_files (char **files, int n);
/* diff.c: --diff and --blocks.  Return the exit status. */
extern int diff_images (const char *a, const char *b);
extern int print_blocks (const char *name);

#endif /* NBDSUM_H */
