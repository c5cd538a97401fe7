/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * What the files that run the transfer share: each file's state, which
 * only that file's functions touch, and the functions others call.  The
 * calls go one way, from the top of this list down, never back:
 *
 *   transfer.c    transfer_run: the transfer from start to end
 *   websocket.c   ws:// and wss:// (websocket.h): the connection and
 *                 the upgrade, which calls wsupgrade.c (its request and
 *                 answer) and wsloop.c (the session), which calls
 *                 wsframe.c (frames)
 *   easyopts.c    the easy handle's options, -v's and --trace-ascii's
 *                 printer
 *   loop.c        the event loop: poll, libcurl's sockets and timer
 *   writeout.c    -w's report
 *   download.c    the header and write callbacks, -D's file
 *   progress.c    the progress line, and the clock
 *   upload.c      standard input: the read and seek callbacks, the
 *                 hold-back
 *   output.c      the answer's buffer and its writing
 *   status.c      why the transfer failed, its message, the exit status
 *   framing.c     the answer's framing, decoded, and where it ends
 *   pause.c       which way of the transfer is paused
 *   connection.c  the connection's socket, and a look at it
 *   fdmodes.c     reads and writes that never block, flags left alone
 *
 * Below, each file's struct and functions, from the bottom of the list
 * up, so that each struct comes after those it holds; then struct
 * pipe_state, which holds them all, and the few things every file reads
 * (set by transfer.c before the transfer starts, changed by none).
 */

#ifndef CURLPIPE_PIPE_H
#define CURLPIPE_PIPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>

#include <curl/curl.h>

#include "curlpipe.h"
#include "secrets.h"

/* Bigger than libcurl's 64 KiB upload and 16 KiB download defaults:
 * fewer callbacks and system calls per byte in a bulk upload, and no
 * cost to an interactive stream, which moves what is there.
 */
#define UPLOAD_BUFFER_SIZE (512 * 1024)
#define DOWNLOAD_BUFFER_SIZE (256 * 1024)

struct pipe_state;

/* fdmodes.c: a descriptor curlpipe reads or writes without blocking. */
struct io {
  int fd;                       /* -1: not open */
  int poll_fd;                  /* what poll watches (see io_open) */
  enum {
    IO_PLAIN,                   /* never blocks: a file, or O_NONBLOCK */
    IO_SOCKET,                  /* MSG_DONTWAIT on each call */
    IO_POLLED,                  /* blocking and shared: poll first */
  } kind;
  bool owned;                   /* curlpipe's own description, to close */
  bool stream;                  /* a pipe or socket */
  bool relayed;                 /* fd: the reader thread's pipe */
};

extern void io_open (struct io *io, int fd, int mode);
extern void io_own (struct io *io, int fd);
extern ssize_t io_read (const struct io *io, void *buf, size_t len);
extern ssize_t io_write (const struct io *io, const void *buf, size_t len);
extern bool io_close (struct io *io);
extern void io_ignore_sigpipe (void);

/* connection.c: the connection to the server. */
struct connection {
  curl_socket_t sock;           /* CURL_SOCKET_BAD: none yet */
};

/* What a look at the connection found (connection_peek). */
enum peek {
  PEEK_NOTHING,                 /* no connection, or nothing to read now */
  PEEK_BYTES,                   /* bytes libcurl has not read */
  PEEK_CLOSED,                  /* the server's end of the connection */
  PEEK_ERROR,                   /* a reset, or another error */
};

extern void connection_init (struct pipe_state *st);
extern int connection_sockopt_cb (void *opaque, curl_socket_t fd,
                                  curlsocktype purpose);
extern curl_socket_t connection_socket (const struct pipe_state *st);
extern enum peek connection_peek (const struct pipe_state *st);
extern bool connection_answer_waiting (const struct pipe_state *st);

/* pause.c: which way of the transfer is paused. */
struct pauses {
  bool upload, download;
};

extern void pause_upload (struct pipe_state *st);
extern void pause_download (struct pipe_state *st);
extern bool pause_holds_upload (const struct pipe_state *st);
extern bool pause_holds_download (const struct pipe_state *st);
extern CURLcode pause_lift_upload (struct pipe_state *st);
extern CURLcode pause_lift_download (struct pipe_state *st);

/* framing.c: the answer's framing, decoded as it comes. */
struct framing {
  bool chunked;                 /* Transfer-Encoding: chunked */
  enum { CH_SIZE, CH_EXT, CH_DATA, CH_DATA_END, CH_TRAILER_START,
         CH_TRAILER, CH_DONE } state;
  uint64_t left;                /* of the chunk's data */
  unsigned digits;              /* of the size being read */
  bool colon;                   /* the trailer line has its colon */
  const char *refused;          /* why the framing is refused, or NULL */
  CURLcode refused_code;        /* ... and the exit status, as curl's */
  curl_off_t received;          /* the body's bytes, decoded */
};

extern void framing_new_answer (struct pipe_state *st);
extern bool framing_header_line (struct pipe_state *st, const char *line,
                                 size_t len);
extern size_t framing_decode (struct pipe_state *st, const char **p,
                              const char *end, const char **data);
extern bool framing_refused (const struct pipe_state *st);
extern const char *framing_refusal (const struct pipe_state *st,
                                    CURLcode *code);
extern curl_off_t framing_received (const struct pipe_state *st);
extern int framing_answer_whole (const struct pipe_state *st);
extern int framing_answer_end (const struct pipe_state *st);

/* status.c: why the transfer failed, as each part found out. */
struct failure {
  char *msg;                    /* main.c's buffer: the message it prints */
  size_t msglen;
  char input[128];              /* reading standard input (exit 26) */
  char output[128];             /* writing the answer (exit 23) */
  char curl[CURL_ERROR_SIZE];   /* libcurl's error buffer */
};

extern void failure_init (struct pipe_state *st, char *msg, size_t msglen);
/* Record why the transfer failed (the first reason wins); main.c, which
 * owns every message, prints it.
 */
extern void failure_report (struct pipe_state *st, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));
extern const char *failure_message (const struct pipe_state *st);
extern void failure_input (struct pipe_state *st, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));
extern void failure_output (struct pipe_state *st, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));
extern void failure_curl (struct pipe_state *st, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));
extern bool failure_input_seen (const struct pipe_state *st);
extern bool failure_output_seen (const struct pipe_state *st);
extern char *failure_curl_buffer (struct pipe_state *st);
extern int exit_status (struct pipe_state *st, CURLcode result);

/* output.c: the answer's bytes not yet written, buf[off..len), and
 * where they go.
 */
struct output {
  char *buf;
  size_t off, len, size;
  struct io out;                /* stdout, or -o FILE (fd -1 until open) */
  struct io err;                /* standard error, for -f's error body */
  struct io *to;                /* &out, or &err */
};

/* Whether len more bytes fit (output_reserve). */
enum output_room {
  OUTPUT_ROOM,                  /* the bytes fit */
  OUTPUT_FULL,                  /* the output takes nothing now */
  OUTPUT_FAILED,                /* writing it failed (recorded) */
};

extern bool output_init (struct pipe_state *st);
extern void output_start (struct pipe_state *st);
extern bool output_file_open (struct pipe_state *st);
extern void output_to_stderr (struct pipe_state *st);
extern bool output_on_stderr (const struct pipe_state *st);
extern size_t output_space (const struct pipe_state *st);
extern enum output_room output_reserve (struct pipe_state *st, size_t len);
extern void output_put (struct pipe_state *st, const char *p, size_t n);
extern bool output_pending (const struct pipe_state *st);
extern int output_poll_fd (const struct pipe_state *st);
extern bool output_flush (struct pipe_state *st);
extern void output_drain (struct pipe_state *st);
extern bool output_close (struct pipe_state *st);

/* upload.c: standard input on its way to the server.  Its bytes held
 * back while the answer that came during their read is taken first
 * (see upload.c's hold_back): held[held_off..held_len).
 */
struct upload {
  struct io in;                 /* standard input */
  off_t start;                  /* a regular file's offset at start */
  curl_off_t promised;          /* the Content-Length sent, -1: none */
  curl_off_t sent;              /* bytes read from standard input */
  bool drained;                 /* the last read took all there was */
  bool eof;
  char *held;
  size_t held_off, held_len;
  bool answer_first;            /* holding them */
  bool answer_read;             /* libcurl has read the socket since */
};

extern void upload_init (struct pipe_state *st);
extern void upload_open (struct pipe_state *st);
extern void upload_close (struct pipe_state *st);
extern curl_off_t upload_length (struct pipe_state *st);
extern CURLcode upload_check_sent (struct pipe_state *st, CURLcode result);
extern curl_off_t upload_sent (const struct pipe_state *st);
extern bool upload_ended (const struct pipe_state *st);
extern int upload_poll_fd (const struct pipe_state *st);
extern bool upload_holding (const struct pipe_state *st);
extern bool upload_answer_read (const struct pipe_state *st);
extern void upload_note_answer_read (struct pipe_state *st);
extern CURLcode upload_release (struct pipe_state *st);
extern size_t upload_read_cb (char *buf, size_t size, size_t nitems,
                              void *opaque);
extern int upload_seek_cb (void *opaque, curl_off_t offset, int origin);
extern void upload_check_end (struct pipe_state *st);

/* progress.c: the progress line. */
struct progress {
  bool shown;                   /* standard error is a terminal, no -s */
  struct timespec start, last;
};

extern double seconds_since (const struct timespec *t);
extern void progress_start (struct pipe_state *st);
extern int progress_wait_ms (const struct pipe_state *st);
extern void progress_show (struct pipe_state *st, bool last);

/* download.c: the answer's headers and the start of its body. */
struct download {
  FILE *headers;                /* -D FILE, NULL for none or "-" */
  int flush_errno;              /* its first failed flush, 0: none */
  long num_headers;             /* in the last answer, for -w */
  bool in_block;                /* an answer's status line came, and not
                                 * yet the blank line ending its headers */
  bool body_started;
};

extern bool download_headers_open (struct pipe_state *st);
extern bool download_headers_close (struct pipe_state *st);
extern long download_num_headers (const struct pipe_state *st);
extern size_t download_header_cb (char *data, size_t size, size_t nmemb,
                                  void *opaque);
extern size_t download_write_cb (char *data, size_t size, size_t nmemb,
                                 void *opaque);

/* writeout.c (write_out_known: curlpipe.h) */
extern void write_out_print (const struct pipe_state *st, int status);

/* loop.c: libcurl's sockets (CURLMOPT_SOCKETFUNCTION) and timer, as the
 * event loop polls them.
 */
#define MAX_SOCKETS 8               /* one HTTP connection, and spares */

struct loop {
  struct { curl_socket_t fd; short events; } socks[MAX_SOCKETS];
  int nsocks;
  long timer_ms;                /* -1: none */
  struct timespec timer_set;
  bool error_unpaused;          /* see loop.c's unpause_after_error */
};

extern CURLcode loop_run (struct pipe_state *st, CURLM *multi);

/* easyopts.c: -v's and --trace-ascii's printer. */
struct trace {
  FILE *file;                   /* --trace-ascii FILE, or NULL */
  struct debug_printer printer;
};

extern bool easy_options_set (struct pipe_state *st,
                              struct curl_slist **headers);
extern bool easy_options_connect (struct pipe_state *st, const char *url);
extern void easy_show_headers (struct pipe_state *st, curl_infotype type,
                               const char *data, size_t size);
extern void easy_options_close (struct pipe_state *st);

/* transfer.c (transfer_run: curlpipe.h) */
struct pipe_state {
  /* What every file reads. */
  const struct options *opt;
  char *url;                    /* opt->url as messages show it */
  CURL *easy;

  /* Each file's own, in the order of the list above. */
  struct trace trace;           /* easyopts.c */
  struct loop loop;             /* loop.c */
  struct download download;     /* download.c */
  struct progress progress;     /* progress.c */
  struct upload upload;         /* upload.c */
  struct output output;         /* output.c */
  struct failure failure;       /* status.c */
  struct framing framing;       /* framing.c */
  struct pauses pauses;         /* pause.c */
  struct connection connection; /* connection.c */
};

#endif /* CURLPIPE_PIPE_H */
