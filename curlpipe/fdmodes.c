/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * Standard input and output in non-blocking mode while curlpipe runs,
 * and put back as they were at exit, on a signal that ends curlpipe and
 * while it is stopped: the shell shares these file descriptions.
 */

#define _GNU_SOURCE            /* F_SETPIPE_SZ */
#include <config.h>

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "curlpipe.h"
#include "pipe.h"

#define PIPE_SIZE (1024 * 1024)     /* Linux's pipe-max-size default */

/* File status flags to put back at exit, for each of fds 0 and 1. */
static int saved_flags[2] = { -1, -1 };

void
restore_flags (void)
{
  int fd;

  for (fd = 0; fd <= 1; fd++)
    if (saved_flags[fd] != -1)
      fcntl (fd, F_SETFL, saved_flags[fd]);
}

static void
on_signal (int sig)
{
  restore_flags ();
  signal (sig, SIG_DFL);
  raise (sig);
}

/* Ctrl-Z and friends: the shell gets its pipes back as they were while
 * curlpipe is stopped.
 */
static void
on_stop (int sig)
{
  int fd;

  restore_flags ();
  raise (SIGSTOP);
  for (fd = 0; fd <= 1; fd++)
    if (saved_flags[fd] != -1)
      fcntl (fd, F_SETFL, saved_flags[fd] | O_NONBLOCK);
}

/* Catch sig unless it is ignored (nohup, background jobs of scripts):
 * an ignored signal stays ignored.
 */
static void
catch (int sig, void (*handler) (int))
{
  struct sigaction sa, old;

  if (sigaction (sig, NULL, &old) == 0 && old.sa_handler == SIG_IGN)
    return;
  memset (&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sigemptyset (&sa.sa_mask);
  sigaction (sig, &sa, NULL);
}

/* O_NONBLOCK on a pipe or socket.  Regular files and devices like
 * /dev/null never block.  A terminal is left alone too: its file
 * description is shared with the shell and with our own standard error,
 * whose messages would then fail with EAGAIN; read_cb polls it instead.
 * A pipe also gets a
 * bigger buffer where the system allows it: with Linux's default 64 KiB
 * each loop turn moved at most 64 KiB, and a 1 GiB upload through a pipe
 * ran at 550 MiB/s against 930 for curl -T - with its blocking reads;
 * fewer, bigger reads close most of that gap.
 */
void
make_nonblocking (int fd)
{
  struct stat st;
  int flags;

  if (fstat (fd, &st) == -1)
    return;
  if (S_ISFIFO (st.st_mode)) {
#if HAVE_DECL_F_SETPIPE_SZ
    fcntl (fd, F_SETPIPE_SZ, PIPE_SIZE);
#endif
  }
  else if (!S_ISSOCK (st.st_mode))
    return;
  flags = fcntl (fd, F_GETFL);
  if (flags == -1 || (flags & O_NONBLOCK))
    return;
  if (fcntl (fd, F_SETFL, flags | O_NONBLOCK) == 0 && fd <= 1)
    saved_flags[fd] = flags;
}

void
catch_signals (void)
{
  /* A reader of standard output that went away is an error to report,
   * not a signal that kills curlpipe mid-message.
   */
  signal (SIGPIPE, SIG_IGN);
  catch (SIGINT, on_signal);
  catch (SIGTERM, on_signal);
  catch (SIGHUP, on_signal);
  catch (SIGQUIT, on_signal);
  /* Other signals that end a process by default: the shell's pipes
   * are put back as they were all the same.
   */
  catch (SIGUSR1, on_signal);
  catch (SIGUSR2, on_signal);
  catch (SIGALRM, on_signal);
  catch (SIGVTALRM, on_signal);
  catch (SIGPROF, on_signal);
  catch (SIGXCPU, on_signal);
  catch (SIGXFSZ, on_signal);
  catch (SIGTSTP, on_stop);
  catch (SIGTTIN, on_stop);
  catch (SIGTTOU, on_stop);
}
