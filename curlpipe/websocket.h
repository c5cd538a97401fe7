/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * ws:// and wss:// (RFC 6455, the client's side).  transfer.c hands
 * such a URL to websocket_run (websocket.c: the connection, the
 * upgrade, the event loop), which uses the frame codec below
 * (wsframe.c: pure functions, no I/O), and below those, easyopts.c,
 * status.c and fdmodes.c (pipe.h).
 */

#ifndef CURLPIPE_WEBSOCKET_H
#define CURLPIPE_WEBSOCKET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "curlpipe.h"

/* websocket.c */
extern bool websocket_url (const char *url);
extern int websocket_run (const struct options *opt, char *msg,
                          size_t msglen);

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

#endif /* CURLPIPE_WEBSOCKET_H */
