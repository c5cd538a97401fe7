/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * test-chain: one link of the read chain against a fake link below it,
 * without a network and without nbdkit.  The link is checksum=
 * (plugins/curl/read/checksum.c).  The fake serves an object from
 * memory, and can serve other bytes at one offset, or change the
 * object after the first read of a range.
 *
 * The cases: reads in order and out of order give the digest's verdict
 * at the read that completes the object; one wrong byte fails that
 * read; with no spill file the link reads again what it could not
 * keep, down the fake below, as a connection of its own, and finds it
 * changed when the second answer differs from the first.
 *
 * Each case runs in a child process: the link's state starts fresh.
 * A failing check is named on stderr with the case's log, and the exit
 * status is 1.  Give a case's name to run only that one.
 */

#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "read/read.h"
#include "stub-nbdkit.h"

#define SIZE (3 * 1024 * 1024 + 5)
#define CHUNK (64 * 1024)
#define CASE_SECS 30

static char *image;

/* The fake link below: what it serves and what it saw. */
static struct {
  int64_t bad_at;               /* serve byte^1 here (-1: none) */
  bool change_on_reread;        /* a range's second read: other bytes */
  unsigned reads, own_reads;    /* all, and of no client of the test's */
  struct ra_client *client;     /* the test's connection */
  char *seen;                   /* how often each byte was served */
} fake;

static int failures;

/* The cache's entries dropped (store/dir.c): checksum's link does so
 * when the bytes are not the object's, so that none is served again.
 */
static unsigned drops;

void
store_drop_all (void)
{
  drops++;
}

void
store_promote (void)
{
}

void
store_write_flush (void)
{
}

static void
check (bool ok, const char *fmt, ...)
{
  va_list ap;

  if (ok)
    return;
  va_start (ap, fmt);
  fprintf (stderr, "FAIL: ");
  vfprintf (stderr, fmt, ap);
  fprintf (stderr, "\n");
  va_end (ap);
  failures++;
}

static int
fake_pread (const struct read_link *self, const struct read_op *op)
{
  uint64_t i;
  bool again = false;

  (void) self;
  fake.reads++;
  if (op->client != fake.client)
    fake.own_reads++;
  for (i = 0; i < op->count; i++) {
    uint64_t at = op->offset + i;

    again |= fake.seen[at] > 0;
    if (fake.seen[at] < 100)
      fake.seen[at]++;
    op->buf[i] = image[at];
    if ((int64_t) at == fake.bad_at)
      op->buf[i] ^= 1;
  }
  if (again && fake.change_on_reread)
    op->buf[0] ^= 0x55;
  return 0;
}

static const struct read_link below = {
  .name = "fake", .pread = fake_pread, .next = NULL,
};
static const struct read_link checksum = {
  .name = "checksum", .pread = checksum_link, .next = &below,
};

/* checksum= of the image, and the link ready as after the probe. */
static void
start (const char *tmpdir)
{
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len, i;
  char value[16 + 2 * EVP_MAX_MD_SIZE] = "sha256:";

  EVP_Digest (image, SIZE, md, &len, EVP_sha256 (), NULL);
  for (i = 0; i < len; i++)
    sprintf (value + 7 + 2 * i, "%02x", md[i]);
  if (tmpdir != NULL)
    setenv ("TMPDIR", tmpdir, 1);
  fake.seen = calloc (SIZE, 1);
  fake.bad_at = -1;
  fake.client = calloc (1, sizeof *fake.client);
  if (fake.seen == NULL || fake.client == NULL ||
      config_set ("url", "http://127.0.0.1:1/obj") == -1 ||
      config_set ("checksum", value) == -1 || config_complete () == -1) {
    fprintf (stderr, "set-up failed: %s\n", stub_last_error ());
    exit (1);
  }
  object.size = SIZE;
  object_serving ();
  check (checksum_on (), "checksum= is on");
  if (checksum_ready () == -1) {
    fprintf (stderr, "checksum_ready: %s\n", stub_last_error ());
    exit (1);
  }
}

/* A read of [offset, offset+count) through the link: its result, and
 * the bytes it returned compared with the image's when it succeeded.
 */
static int
read_at (uint64_t offset, uint32_t count)
{
  char *buf = malloc (count);
  struct read_op op = {
    .client = fake.client, .buf = buf, .count = count, .offset = offset,
  };
  int r;

  if (buf == NULL)
    abort ();
  errno = 0;
  r = checksum.pread (&checksum, &op);
  if (r == 0 && fake.bad_at < 0 && !fake.change_on_reread)
    check (memcmp (buf, image + offset, count) == 0,
           "bytes %" PRIu64 "+%" PRIu32 " as the image's", offset, count);
  free (buf);
  return r;
}

/* Reads of every chunk from 'from' to 'to' (exclusive), in order:
 * how many failed, and the last one's result.
 */
static int
read_range (uint64_t from, uint64_t to, unsigned *failed)
{
  int r = 0;

  for (; from < to; from += CHUNK) {
    r = read_at (from, from + CHUNK < to ? CHUNK : to - from);
    if (r == -1)
      ++*failed;
  }
  return r;
}

static void
in_order (void)
{
  unsigned failed = 0;

  start (NULL);
  check (read_range (0, SIZE, &failed) == 0 && failed == 0,
         "reads in order all succeed (%u failed: %s)", failed,
         stub_last_error ());
  check (stub_errors () == 0, "no error (%s)", stub_last_error ());
  check (fake.own_reads == 0, "nothing read again (%u)", fake.own_reads);
  check (drops == 0, "the cache's entries kept (%u drops)", drops);
}

static void
one_wrong_byte (void)
{
  unsigned failed = 0;
  int r;

  start (NULL);
  fake.bad_at = SIZE / 2;
  r = read_range (0, SIZE, &failed);
  check (r == -1 && errno == EIO, "the read that completes the object "
         "fails with EIO (%d, errno %d)", r, errno);
  check (failed == 1, "only that read fails (%u)", failed);
  check (strstr (stub_last_error (), "not the object expected") != NULL,
         "the error says so: %s", stub_last_error ());
  check (read_at (0, 512) == -1, "every read after it fails");
  check (drops > 0, "the cache's entries dropped");
}

static void
out_of_order (void)
{
  char dir[] = "/tmp/test-chain.XXXXXX";
  unsigned failed = 0;

  if (mkdtemp (dir) == NULL) {
    perror ("mkdtemp");
    exit (1);
  }
  start (dir);
  read_range (SIZE / 2, SIZE, &failed);
  check (failed == 0, "the second half, spilled (%u failed)", failed);
  check (read_range (0, SIZE / 2, &failed) == 0 && failed == 0,
         "then the first half: all succeed (%s)", stub_last_error ());
  check (stub_errors () == 0, "no error (%s)", stub_last_error ());
  check (fake.own_reads == 0, "nothing read again: it was spilled (%u)",
         fake.own_reads);
  rmdir (dir);
}

/* No spill file: what was read ahead of the digest is kept as digests
 * of what was served, and read again down the link below at the end.
 */
static void
read_again (void)
{
  unsigned failed = 0;

  start ("/nonexistent-test-chain");
  read_range (SIZE / 2, SIZE, &failed);
  check (read_range (0, SIZE / 2, &failed) == 0 && failed == 0,
         "reads out of order, no spill file: all succeed (%s)",
         stub_last_error ());
  check (fake.own_reads > 0, "the link read again below, as a "
         "connection of its own (%u reads)", fake.own_reads);
  check (stub_errors () == 0, "no error (%s)", stub_last_error ());
}

static void
changed_on_reread (void)
{
  unsigned failed = 0;
  int r;

  start ("/nonexistent-test-chain");
  fake.change_on_reread = true;
  read_range (SIZE / 2, SIZE, &failed);
  r = read_range (0, SIZE / 2, &failed);
  check (r == -1 && errno == EIO, "the read that completes the object "
         "fails (%d, errno %d)", r, errno);
  check (strstr (stub_last_error (), "changed") != NULL,
         "the error says the object changed: %s", stub_last_error ());
  check (drops > 0, "the cache's entries dropped");
}

static const struct {
  const char *name;
  void (*run) (void);
} cases[] = {
  { "in-order", in_order },
  { "one-wrong-byte", one_wrong_byte },
  { "out-of-order", out_of_order },
  { "read-again", read_again },
  { "changed-on-reread", changed_on_reread },
};

static int
run_case (unsigned i)
{
  pid_t pid = fork ();
  int status;

  if (pid == -1) {
    perror ("fork");
    return 1;
  }
  if (pid == 0) {
    alarm (CASE_SECS);
    cases[i].run ();
    if (failures > 0)
      stub_print_log ();
    checksum_unload ();
    config_unload ();
    _exit (failures > 0);
  }
  if (waitpid (pid, &status, 0) == -1 || !WIFEXITED (status) ||
      WEXITSTATUS (status) != 0) {
    fprintf (stderr, "FAIL: case %s\n", cases[i].name);
    return 1;
  }
  printf ("ok: %s\n", cases[i].name);
  return 0;
}

int
main (int argc, char *argv[])
{
  unsigned i, bad = 0, ran = 0;

  image = malloc (SIZE);
  if (image == NULL)
    abort ();
  for (i = 0; i < SIZE; i++)
    image[i] = (char) ((i * 31 + (i >> 8) + 7) & 0xff);
  for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (argc > 1 && strcmp (argv[1], cases[i].name) != 0)
      continue;
    bad += run_case (i);
    ran++;
  }
  free (image);
  if (ran == 0) {
    fprintf (stderr, "no case named %s\n", argv[1]);
    return 1;
  }
  return bad > 0;
}
