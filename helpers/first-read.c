/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * first-read NBD-URI
 *
 * The cheapest honest "first read" client for bench/wan: connect to
 * NBD-URI, read 4 KiB at offset 0, write them to standard output (so
 * the caller can compare them with the image) and exit.  nbdsh costs
 * about 80 ms of Python start-up per run on the benchmark machines,
 * which would hide the few round trips being measured; this costs a
 * few milliseconds, and bench/wan measures and prints that overhead
 * against nbdkit's null plugin.
 */

#include <stdio.h>
#include <stdlib.h>

#include <libnbd.h>

int
main (int argc, char **argv)
{
  static char buf[4096];
  struct nbd_handle *h;

  if (argc != 2) {
    fprintf (stderr, "usage: first-read NBD-URI\n");
    exit (2);
  }
  h = nbd_create ();
  if (h == NULL) {
    fprintf (stderr, "first-read: nbd_create: %s\n", nbd_get_error ());
    exit (1);
  }
  if (nbd_connect_uri (h, argv[1]) == -1) {
    fprintf (stderr, "first-read: nbd_connect_uri: %s: %s\n",
             argv[1], nbd_get_error ());
    exit (1);
  }
  if (nbd_pread (h, buf, sizeof buf, 0, 0) == -1) {
    fprintf (stderr, "first-read: nbd_pread: %s: 4096 bytes at 0: %s\n",
             argv[1], nbd_get_error ());
    exit (1);
  }
  if (fwrite (buf, 1, sizeof buf, stdout) != sizeof buf ||
      fflush (stdout) == EOF) {
    perror ("first-read: write");
    exit (1);
  }
  nbd_close (h);
  return 0;
}
