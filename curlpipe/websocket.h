/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * ws:// and wss:// (RFC 6455, the client's side).  transfer.c hands
 * such a URL to websocket_run (websocket.c: the connection and the
 * upgrade), which calls wsupgrade.c (the upgrade's request and the
 * check of its answer, pure functions) and wsloop.c (the session's
 * event loop), which calls wsframe.c (the frame codec, pure functions,
 * no I/O); below those, easyopts.c, status.c and fdmodes.c (pipe.h).
 */

#ifndef CURLPIPE_WEBSOCKET_H
#define CURLPIPE_WEBSOCKET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "curlpipe.h"
#include "pipe.h"

/* websocket.c */
extern bool websocket_url (const char *url);
extern int websocket_run (const struct options *opt, char *msg,
                          size_t msglen);

/* wsupgrade.c: the upgrade request (malloc'd, *len bytes; false when
 * out of memory), and its answer's check: CURLE_OK, or curl's code for
 * the refusal with why in why.
 */
extern void ws_base64 (char *out, const void *in, size_t n);
extern bool ws_request (const struct options *opt, CURLU *u,
                        const char *key, char **req, size_t *len);
extern CURLcode ws_check_answer (const char *buf, size_t hlen,
                                 const char *key, char *why,
                                 size_t whylen);

/* wsframe.c: opcodes (RFC 6455 section 5.2). */
enum {
  WS_CONT = 0x0, WS_TEXT = 0x1, WS_BINARY = 0x2,
  WS_CLOSE = 0x8, WS_PING = 0x9, WS_PONG = 0xa,
};

#define WS_HEAD_MAX 14          /* 2 + 8 bytes of length + 4 of mask */
#define WS_CONTROL_MAX 125      /* a control frame's payload, at most */

/* A frame's header, as parsed. */
struct ws_frame {
  bool fin;
  unsigned opcode;
  uint64_t len;                 /* of the payload */
};

/* The header being parsed, from bytes as they come. */
struct ws_parser {
  uint8_t head[WS_HEAD_MAX];
  unsigned have;                /* bytes of head so far */
};

enum ws_parse { WS_PARSE_MORE, WS_PARSE_DONE, WS_PARSE_BAD };

/* Takes header bytes from [*p, end), advancing *p: WS_PARSE_DONE with
 * *f set, WS_PARSE_MORE when all were taken, or WS_PARSE_BAD with *why
 * saying what a server must not send.
 */
extern enum ws_parse ws_parse_head (struct ws_parser *ps, const uint8_t **p,
                                    const uint8_t *end, struct ws_frame *f,
                                    const char **why);

/* Is frame f allowed after the frames before it?  *in_message: a
 * fragmented message started and not yet ended; updated.  NULL when
 * allowed, else why not.
 */
extern const char *ws_check_sequence (bool *in_message,
                                      const struct ws_frame *f);

/* The header of a masked client frame into out (WS_HEAD_MAX bytes):
 * its length.
 */
extern size_t ws_build_head (uint8_t *out, unsigned opcode, bool fin,
                             uint64_t len, const uint8_t key[4]);

/* XOR len bytes with the key, starting at the key's byte offset % 4. */
extern void ws_mask (uint8_t *p, size_t len, const uint8_t key[4],
                     size_t offset);

/* wsloop.c: the session, the state websocket.c sets up for it, and
 * the failures both report (the first one wins).  Mask keys come from
 * KEYS_SIZE random bytes at a time: one getrandom call for 64 frames.
 */
#define KEYS_SIZE 256

struct ws {
  struct pipe_state *st;        /* the easy handle, failure, -v */
  curl_socket_t sock;
  struct io in, out;
  struct timespec start;
  CURLcode result;              /* the first failure, CURLE_OK: none */

  uint8_t keys[KEYS_SIZE];
  size_t keys_used;

  /* Sending: a data frame sbuf[soff..slen), a control frame
   * cbuf[coff..clen), each sent whole before the next starts.
   */
  uint8_t *sbuf;
  size_t soff, slen;
  uint8_t cbuf[WS_HEAD_MAX + WS_CONTROL_MAX];
  size_t coff, clen;
  bool cbuf_close;              /* cbuf holds the close */
  bool send_blocked;            /* the socket took nothing: POLLOUT */
  bool pong_due;
  uint8_t pong[WS_CONTROL_MAX];
  size_t pong_len;
  bool close_due, close_sent;
  uint8_t close_payload[2];
  size_t close_len;
  bool in_eof;
  bool in_blocked;              /* standard input had nothing: POLLIN */

  /* Receiving: rbuf[roff..rlen) not yet taken. */
  uint8_t *rbuf;
  size_t roff, rlen;
  struct ws_parser parser;
  bool in_frame;
  struct ws_frame frame;
  uint64_t left;                /* of the frame's payload */
  bool in_message;
  uint8_t ctl[WS_CONTROL_MAX];
  size_t ctl_len;
  bool close_got;
  unsigned close_code;          /* 0: none given */
  char reason[WS_CONTROL_MAX + 1];
  bool out_blocked;             /* standard output took nothing: POLLOUT */
  bool peer_eof;
};

extern void ws_fail (struct ws *ws, CURLcode code, const char *fmt, ...)
  __attribute__ ((format (printf, 3, 4)));
extern void ws_fail_curl (struct ws *ws, CURLcode code);
extern int ws_time_left_ms (const struct ws *ws);
extern void ws_session (struct ws *ws);

#endif /* CURLPIPE_WEBSOCKET_H */
