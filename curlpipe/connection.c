/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The connection libcurl makes to the server (struct connection): its
 * socket, as libcurl names it through CURLOPT_SOCKOPTFUNCTION, and a
 * look at what the server has sent that libcurl has not read yet, which
 * takes nothing from it.
 */

#include <config.h>

#include <errno.h>
#include <sys/socket.h>

#include "curlpipe.h"
#include "pipe.h"

void
connection_init (struct pipe_state *st)
{
  st->connection.sock = CURL_SOCKET_BAD;
}

/* CURLOPT_SOCKOPTFUNCTION: each socket libcurl opens; the last is the
 * connection.
 */
int
connection_sockopt_cb (void *opaque, curl_socket_t fd, curlsocktype purpose)
{
  struct pipe_state *st = opaque;

  st->connection.sock = fd;
  return CURL_SOCKOPT_OK;
}

curl_socket_t
connection_socket (const struct pipe_state *st)
{
  return st->connection.sock;
}

/* What the server has sent that libcurl has not read, without taking
 * it.
 */
enum peek
connection_peek (const struct pipe_state *st)
{
  char c;
  ssize_t r;

  if (st->connection.sock == CURL_SOCKET_BAD)
    return PEEK_NOTHING;
  r = recv (st->connection.sock, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (r > 0)
    return PEEK_BYTES;
  if (r == 0)
    return PEEK_CLOSED;
  if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
    return PEEK_ERROR;
  return PEEK_NOTHING;
}

/* Has the server sent something libcurl has not read yet (bytes, its
 * end, or a reset)?
 */
bool
connection_answer_waiting (const struct pipe_state *st)
{
  return connection_peek (st) != PEEK_NOTHING;
}
