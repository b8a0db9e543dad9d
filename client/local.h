/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: a private server for an input, reached through a Unix
 * socket it inherits (socket activation): nbdkit for a local file, or
 * the server of a [ CMD ARGS... ] input.
 */
#ifndef NBDSUM_LOCAL_H
#define NBDSUM_LOCAL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct local_server;

/* local-nbdkit.c: serve the file at path (name is for messages, and
 * probing dmg) as format (lib/imgformat.h's names), or as its first
 * bytes say when NULL.  NULL on error (printed): also for a file
 * nbdsum does not read as guest content (luks, a fixed-size VHD, two
 * formats at once, any image format but raw without qemu-nbd).
 */
extern struct local_server *local_server_start (const char *name,
                                                const char *path,
                                                const char *format);
/* local-nbdkit.c: a private nbdkit --filter=blkhash in front of the
 * server at uri (a URI's, or a [ CMD ]'s socket), by its nbd plugin:
 * nbdsum's one engine for a server without the filter, or
 * --client-side.  Each connection to it is one to the server.  NULL on
 * error (printed).
 */
extern struct local_server *local_server_start_front (const char *name,
                                                      const char *uri);
/* The format a file is served as; NULL for a [ CMD ]'s server. */
extern const char *local_server_format (const struct local_server *s);
/* local-file.c: a local file nbdkit cannot serve but a read can
 * hash, as sha256sum does: a pipe (nbdsum <(...)), a character
 * device, a file saying size 0 that has bytes (/proc, /sys).  Returns
 * a descriptor to read it from, -1 when path is for
 * local_server_start (or does not open), -2 when a stop signal ended
 * the wait to open it (said nothing).
 */
extern int local_stream_open (const char *path);

/* Run argv, a server taking its socket by systemd socket activation
 * (qemu-nbd, nbdkit, ...), as nbdinfo and nbdcopy do for [ CMD ]. */
extern struct local_server *local_server_start_command (const char *name,
                                                        char **argv);
/* A private nbdkit (argv, kept until it returns: argv[0] a path) for
 * name, its stderr taken as local_server_start's, serving format.
 */
extern struct local_server *local_server_start_private (const char *name,
                                                        const char *format,
                                                        char **argv);
/* local-http.c: an http:// or https:// URL read by nbdkit's curl
 * plugin as its bytes (format NULL or "raw"; any other refused), behind
 * the blkhash filter.  NULL on error (printed).
 */
extern struct local_server *local_server_start_http (const char *name,
                                                     const char *format);
/* local-http.c: why the private nbdkit of a URL failed a connection,
 * in nbdsum's words (the HTTP status, no ranges...), or NULL if it
 * said nothing.  The caller frees it.
 */
extern char *local_http_message (struct local_server *s);
/* local-bitmap.c: --since of a local qcow2 file: qemu-nbd with the
 * dirty bitmap and the allocation depth, for as many connections as
 * nbdsum makes, once the bitmap is checked.
 */
extern struct local_server *local_server_start_bitmap (const char *name,
                                                       const char *path,
                                                       const char *bitmap);
extern const char *local_server_uri (const struct local_server *s);
/* Why nbdsum's own server (not a [ CMD ]'s) failed, in its own words
 * on one line: what it wrote on its standard error, less nbdkit's
 * lines when qemu-nbd behind it said more.  NULL if it said nothing.
 * The caller frees it; local_server_stop prints whatever was not
 * taken so.
 */
extern char *local_server_message (struct local_server *s);
/* For a connection to our own server that may be refused (one of
 * -C's after the first): where its log is now; then why it refused
 * the connection, in nbdkit's words from its log since mark, not
 * printed again when it stops ("nbdsum's private nbdkit: TEXT"), or
 * NULL (not ours, or nothing said: the error the client got says it).
 * The caller frees it.
 */
extern off_t local_server_log_mark (const struct local_server *s);
/* Does text, the nbd plugin's failed connection ("nbd_connect_uri:
 * ..."), say that the server closed it before greeting it?  libnbd's
 * words vary with when it saw that, some are its state names: said
 * as LOCAL_UNGREETED instead.
 */
extern bool local_said_ungreeted (const char *text);
#define LOCAL_UNGREETED "the server closed its connection before greeting it"
extern char *local_server_refusal (struct local_server *s, off_t mark);
/* Why a read from our own server failed (with errno err), from its
 * log once it has exited (stopped here: a failure ends the input):
 * the first error below the filter (qemu-nbd's lines are), else the
 * filter's first that gives an errno's words, consequences of a
 * broken connection last, and how many errors there were besides;
 * else the signal that killed or stopped it, not nbdsum's; NULL if
 * none (or s is NULL, or not ours: the errno the client got says
 * it).  The rest of its log is of the same failure: not printed when
 * it ends.  The caller frees it.
 */
extern char *local_server_cause (struct local_server *s, int err);

/* File descriptors a server of n connections needs (nbdkit 1.32 with
 * the filter needs 8 + 4n, at least 16), with room to spare: one that
 * runs short stops answering, or floods its standard error.  Starting
 * one fails, saying so, under a lower ulimit -n.
 */
#define LOCAL_SERVER_FDS(n) (16 + 4 * (n))
/* How long a connection to the private nbdkit of a file may take to
 * connect and negotiate when --connect-timeout does not say: it only
 * starts (with qemu-nbd behind it for qcow2).
 */
#define LOCAL_HANDSHAKE_SECONDS 30
/* That limit for s, in seconds: 0 (none) for a [ CMD ]'s server. */
extern double local_server_handshake_limit (const struct local_server *s);

/* Is it a [ CMD ]'s server (the user's, as a URI's is), not ours? */
extern bool local_server_is_command (const struct local_server *s);
/* What serves it: "private nbdkit", or the command's program. */
extern const char *local_server_what (const struct local_server *s);
/* Has the server exited (for a clearer error)?  nbdsum's own is
 * waited for up to 2 seconds: a connection breaks a moment before it
 * exits.
 */
extern bool local_server_exited (struct local_server *s);
/* Once it serves (a connection made): do its processes hold open only
 * the files nbdsum checked (local_pins_verify)?  0, or -1 after saying
 * why (then stop it).
 */
extern int local_server_verify (struct local_server *s);
/* Kill it at once, before closing connections that still have requests
 * in flight: a dead server cannot trip over them.
 */
extern void local_server_kill (struct local_server *s);
/* A connection of ours timed out in its handshake while s serves
 * others: s would wait for it on SIGTERM, so it will be stopped with
 * local_server_kill.
 */
extern void local_server_abandoned (struct local_server *s);
/* Stop it now, but let it clean up: SIGTERM, and what local_server_kill
 * does if it lingers (a raw file's nbdkit, with nothing to clean up:
 * local_server_kill at once).  Not with requests in flight (nbdkit before
 * 1.33.10 aborts on a client gone mid-request).
 */
extern void local_server_end (struct local_server *s);
/* Stop it (SIGTERM, SIGKILL if it lingers) and remove its socket. */
extern void local_server_stop (struct local_server *s);

/* local-file.c: the format of the image at fd, named name, as qemu
 * probes it (its name counts for dmg), or NULL after saying why nbdsum
 * refuses it.  With given (a format --format or a checksum line gave),
 * that format, unless the probe finds it encrypted.
 */
extern const char *local_file_format (const char *name, int fd,
                                      const char *given);
/* Is the file at path on one of the kernel's own file systems (proc,
 * sysfs, cgroup, debugfs, tracefs, configfs, bpf, efivarfs, pstore
 * ...)?  No image, whatever stat says: reading some of them blocks, or
 * takes what it reads from others (/proc/kmsg).
 */
extern bool local_kernel_file (const char *path);
/* Read all of count bytes at offset of fd, or as many as there are:
 * how many, or -1 with errno set.
 */
extern ssize_t local_pread_full (int fd, void *buf, size_t count,
                                 off_t offset);
/* Does the regular file at fd, which says size 0, have bytes (a /proc
 * or /sys file)?
 */
extern bool local_file_has_bytes (int fd);

/* Where an image's format came from: only the user's word lets
 * --allow-backing follow names outside its directory.
 */
enum format_origin {
  FORMAT_PROBED,                /* its first bytes */
  FORMAT_TAG,                   /* a checksum line's tag */
  FORMAT_GIVEN,                 /* --format */
};
/* Descriptors nbdsum holds open for a private qemu-nbd, which opens
 * the files of an image through them (/proc/PID/fd/N): the very files
 * checked, whatever is renamed into their places meanwhile.
 */
struct local_pins {
  int *fds;
  size_t n;
};
extern void local_pins_close (struct local_pins *p);
/* local-spec.c: do the processes of group pgid (a private server) hold
 * open no file but those pinned (sockets, pipes and /dev/null aside)?
 * 0, or -1 after saying which.
 */
extern int local_pins_verify (const char *name, const struct local_pins *p,
                              pid_t pgid);
/* local-spec.c: the image at path (absolute, as given) read as
 * format (not raw), found as origin says: every file it names checked
 * against the policy (nbdsum(1), SECURITY; --allow-backing) and pinned
 * in *pins, then each layer read by qemu-img info, which must find
 * the same names.  Returns the json: spec that names all those files
 * for qemu-nbd (malloc'd; *pins the caller's to close after the
 * server is gone), or NULL after saying why the image is refused.
 * With alone, also the spec of the image without its backing file,
 * which qemu-img info takes.
 */
extern char *local_chain_spec (const char *name, const char *path,
                               const char *format,
                               enum format_origin origin, char **alone,
                               struct local_pins *pins);

/* qemu-img.c: run qemu-img info --output=json -U on spec (a json:
 * spec of local_chain_spec's, so that it opens nothing unchecked) and
 * hand its output to read_info.  0, or -1 (error printed: qemu-img's
 * own reason, naming layer, a backing file, unless NULL; or
 * read_info's -1).
 */
struct json_reader;
typedef int local_info_fn (struct json_reader *r, void *opaque);
extern int local_qemu_img_info (const char *name, const char *layer,
                                const char *spec, local_info_fn *read_info,
                                void *opaque);

#endif /* NBDSUM_LOCAL_H */
