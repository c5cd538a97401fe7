/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * test-store: the cache's disk (plugins/curl/store/) on a real directory,
 * without nbdkit or a server.  A block written is read back byte for byte,
 * whole or in part.  A block whose file was damaged is never served: one
 * byte flipped, cut short, its header edited, another block's file, or
 * another object's.  A damaged chunk does not keep the others from being
 * served.  Pieces make a block once all of them are there.  Claims: one
 * process's second claim waits, a dead process's claim is taken over.
 * The directory is refused when it is a symlink or others can write into
 * it or into a folder above it without the sticky bit (and then it is not
 * made).  Eviction keeps
 * the directory under its bound, oldest first.
 */

#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store/store.h"
#include "stub-nbdkit.h"

#define SIZE (5 * STORE_BLOCK + 12345)  /* the last block is short */
#define KEY "url http://127.0.0.1/x\nsize 5255225\netag \"1\"\n"

static char top[] = "/tmp/test-store.XXXXXX";
static char *image;
static int failures;

static void
check (bool ok, const char *fmt, ...)
{
  va_list ap;

  if (ok)
    return;
  va_start (ap, fmt);
  fprintf (stderr, "FAIL: test-store: ");
  vfprintf (stderr, fmt, ap);
  fprintf (stderr, "\n");
  va_end (ap);
  failures++;
}

static void
path (char *buf, size_t size, const char *fmt, ...)
{
  va_list ap;
  int n = snprintf (buf, size, "%s/", top);

  va_start (ap, fmt);
  vsnprintf (buf + n, size - n, fmt, ap);
  va_end (ap);
}

static const char *cur = "d";   /* the directory open_dir opened */

/* A fresh directory DIR under top, opened for the object of KEY. */
static void
open_dir (const char *dir, uint64_t limit)
{
  char p[256];

  cur = dir;
  path (p, sizeof p, "%s", dir);
  if (store_check_dir (p) == -1 || !store_open (KEY, KEY, NULL, SIZE, limit)) {
    fprintf (stderr, "test-store: cannot open %s: %s\n", p,
             stub_last_error ());
    exit (1);
  }
}

static uint32_t bad;             /* the chunks the last get refused */

static int
get (uint64_t block, uint32_t off, uint32_t len, char *buf)
{
  return store_get (block, buf, off, len, &bad);
}

/* Bytes [off, off+len) of block from the cache are the image's. */
static bool
same (uint64_t block, uint32_t off, uint32_t len)
{
  char *buf = malloc (len);
  bool ok = get (block, off, len, buf) == 1 &&
    memcmp (buf, image + block * STORE_BLOCK + off, len) == 0;

  free (buf);
  return ok;
}

static void
put_all (void)
{
  uint64_t b;

  for (b = 0; b < store.nblocks; b++)
    check (store_put (b, image + b * STORE_BLOCK), "block %" PRIu64
           " written", b);
}

/* The object's file of block, by name. */
static void
block_file (char *buf, size_t size, uint64_t block)
{
  char dir[300];

  path (dir, sizeof dir, "%s/%s/%" PRIu64 ".blk", cur, store.hash_hex,
        block);
  snprintf (buf, size, "%s", dir);
}

static void
flip (uint64_t block, off_t at)
{
  char f[400];
  unsigned char c;
  int fd;

  block_file (f, sizeof f, block);
  fd = open (f, O_RDWR);
  if (fd == -1 || pread (fd, &c, 1, at) != 1) {
    perror (f);
    exit (1);
  }
  c ^= 0x20;
  if (pwrite (fd, &c, 1, at) != 1)
    exit (1);
  close (fd);
}

static void
written_and_read (void)
{
  char buf[100];

  open_dir ("d", 0);
  check (get (0, 0, 100, buf) == 0, "nothing there before");
  put_all ();
  check (same (0, 0, STORE_BLOCK), "block 0 whole");
  check (same (5, 0, 12345), "the short last block whole");
  check (same (2, 70000, 100000), "a part across chunks");
  check (same (3, 1, 1), "one byte");
  check (store_has (4), "block 4 known to be there");
  check (store.counts.written == 6, "6 blocks written (%" PRIu64 ")",
         store.counts.written);
}

static void
damage_refused (void)
{
  char f[400], g[400], *whole = malloc (STORE_BLOCK);

  /* A byte flipped in the second chunk of block 1: that chunk is
   * refused, the first is still good.
   */
  flip (1, STORE_HEADER + STORE_CHUNK + 5);
  check (get (1, STORE_CHUNK, 10, f) == -1, "a flipped byte is refused");
  check (get (1, 0, STORE_BLOCK, whole) == -1,
         "a whole read with the flipped byte in it is refused");
  check (bad == 2, "only the chunk with the flipped byte is to fetch "
         "(%#x)", bad);
  check (memcmp (whole, image + STORE_BLOCK, STORE_CHUNK) == 0 &&
         memcmp (whole + 2 * STORE_CHUNK, image + STORE_BLOCK +
                 2 * STORE_CHUNK, STORE_BLOCK - 2 * STORE_CHUNK) == 0,
         "the other chunks' bytes are served");
  check (same (1, 0, STORE_CHUNK), "the chunk before it is still served");
  /* Cut short. */
  block_file (f, sizeof f, 2);
  check (truncate (f, STORE_HEADER + 1000) == 0, "truncate");
  check (get (2, 0, 10, g) == -1 && bad == 1,
         "a file cut short is refused");
  /* The header edited: the length. */
  flip (3, 24);
  check (get (3, 0, 10, g) == -1, "an edited header is refused");
  /* Another block's file in block 4's place. */
  block_file (f, sizeof f, 0);
  block_file (g, sizeof g, 4);
  check (rename (f, g) == 0, "rename");
  check (get (4, 0, 10, f) == -1, "another block's file is refused");
  /* Written again, each is served again. */
  put_all ();
  check (same (1, 0, STORE_BLOCK) && same (2, 0, STORE_BLOCK) &&
         same (3, 0, STORE_BLOCK) && same (4, 0, STORE_BLOCK),
         "rewritten blocks are served");
  free (whole);
}

static void
other_object_refused (void)
{
  char f[400], g[400], dir2[300];

  open_dir ("d", 0);
  put_all ();
  block_file (f, sizeof f, 1);
  store_close ();
  /* Another object (another ETag), its block 1 replaced by ours. */
  path (dir2, sizeof dir2, "d");
  if (store_check_dir (dir2) == -1 ||
      !store_open ("url http://127.0.0.1/x\nsize 5255225\netag \"2\"\n",
                   "another", NULL, SIZE, 0))
    exit (1);
  store_put (1, image + STORE_BLOCK);
  block_file (g, sizeof g, 1);
  check (strcmp (f, g) != 0, "two objects, two folders");
  check (rename (f, g) == 0, "rename");
  check (store_put (0, image) && get (1, 0, 10, f) == -1,
         "another object's block is refused");
}

static void
pieces (void)
{
  char buf[64];

  open_dir ("p", 0);
  /* Pieces of block 2, out of order and not on unit boundaries. */
  store_part (2, 700000, image + 2 * STORE_BLOCK + 700000,
              STORE_BLOCK - 700000);
  store_part (2, 0, image + 2 * STORE_BLOCK, 300001);
  check (get (2, 0, 64, buf) == 0, "no block before all pieces came");
  store_part (2, 299000, image + 2 * STORE_BLOCK + 299000, 402000);
  check (same (2, 0, STORE_BLOCK), "the pieces made the block");
  /* The short last block, in two pieces. */
  store_part (5, 4096, image + 5 * STORE_BLOCK + 4096, 12345 - 4096);
  store_part (5, 0, image + 5 * STORE_BLOCK, 4096);
  check (same (5, 0, 12345), "the last block from pieces");
}

static void
claims (void)
{
  char f[300];
  int fd;

  open_dir ("c", 0);
  check (store_claim (1) == CLAIM_MINE, "a first claim is mine");
  check (store_claim (1) == CLAIM_OTHERS, "a second claim waits");
  check (store_claimed (1), "the block is claimed");
  check (store_put (1, image + STORE_BLOCK), "the claimed block written");
  store_unclaim (1);
  check (!store_claimed (1), "the claim went with the write");
  check (same (1, 0, STORE_BLOCK), "the claimed block is served");
  path (f, sizeof f, "c/%s/1.claim", store.hash_hex);
  check (access (f, F_OK) == -1, "no claim file left");
  /* A dead process's claim on this host is taken over; one of a live
   * process (pid 1) is not.
   */
  path (f, sizeof f, "c/%s/2.claim", store.hash_hex);
  fd = open (f, O_WRONLY | O_CREAT | O_EXCL, 0600);
  dprintf (fd, "%s %d\n", store.host, 999999999);
  close (fd);
  check (store_claim (2) == CLAIM_MINE, "a dead process's claim is taken");
  store_unclaim (2);
  fd = open (f, O_WRONLY | O_CREAT | O_EXCL, 0600);
  dprintf (fd, "%s %d\n", store.host, 1);
  close (fd);
  check (store_claim (2) == CLAIM_OTHERS, "a live process's claim holds");
  /* A claim given up leaves neither file behind. */
  unlink (f);
  check (store_claim (3) == CLAIM_MINE, "claim 3");
  store_unclaim (3);
  path (f, sizeof f, "c/%s/3.claim", store.hash_hex);
  check (access (f, F_OK) == -1, "a claim given up is gone");
}

static bool
refused (const char *dir)
{
  char p[256];

  path (p, sizeof p, "%s", dir);
  return store_check_dir (p) == -1;
}

static void
directories (void)
{
  char p[256], q[256];

  path (p, sizeof p, "real");
  path (q, sizeof q, "link");
  mkdir (p, 0700);
  check (symlink (p, q) == 0, "symlink");
  check (refused ("link"), "a symlink is refused: %s", stub_last_error ());
  path (p, sizeof p, "open");
  mkdir (p, 0700);
  chmod (p, 0777);
  check (refused ("open"), "mode 0777 is refused: %s", stub_last_error ());
  chmod (p, 0770);
  check (refused ("open"), "mode 0770 is refused");
  path (p, sizeof p, "sticky");
  mkdir (p, 0700);
  chmod (p, 01777);
  path (p, sizeof p, "sticky/in");
  check (!refused ("sticky/in"), "under a sticky folder is fine: %s",
         stub_last_error ());
  path (p, sizeof p, "loose");
  mkdir (p, 0700);
  chmod (p, 0777);
  check (refused ("loose/in"), "under a folder others can write into is "
         "refused: %s", stub_last_error ());
  path (p, sizeof p, "loose/in");
  check (access (p, F_OK) == -1, "and is not made there");
  /* A symlink in such a folder to a safe one: realpath would see only
   * the safe one.
   */
  path (p, sizeof p, "loose/to-real");
  path (q, sizeof q, "real");
  check (symlink (q, p) == 0, "symlink");
  check (refused ("loose/to-real/planted"), "through a symlink in a folder "
         "others can write into is refused: %s", stub_last_error ());
  path (p, sizeof p, "real/planted");
  check (access (p, F_OK) == -1, "and nothing is made where it points");
  path (p, sizeof p, "made");
  check (!refused ("made"), "a missing directory is made");
  check (access (p, F_OK) == 0, "and is there");
}

static void
eviction (void)
{
  char f[400];
  struct timespec t[2] = { { 0 } };
  uint64_t b;

  open_dir ("e", 3 * STORE_BLOCK);
  put_all ();
  /* Block b was last used at time b: the oldest go first. */
  for (b = 0; b < store.nblocks; b++) {
    block_file (f, sizeof f, b);
    t[0].tv_sec = t[1].tv_sec = 1000000 + b;
    utimensat (AT_FDCWD, f, t, 0);
  }
  store_evict_start ();
  store_evict_stop ();
  block_file (f, sizeof f, 0);
  check (access (f, F_OK) == -1, "the oldest block evicted");
  block_file (f, sizeof f, 5);
  check (access (f, F_OK) == 0, "the newest block kept");
  check (!store_has (0) && store_has (5), "what is known follows");
}

/* checksum= proved what this process served: the blocks it wrote move
 * to the shared folder, but not one that another process replaced since
 * (N9 of the attack: its bytes were never proven).
 */
static void
promote (void)
{
  char p[256], f[400], *other = malloc (STORE_BLOCK);
  uint64_t saved;

  path (p, sizeof p, "s");
  if (store_check_dir (p) == -1 ||
      !store_open ("checksum x\nurl u\n", "u", "checksum x\n", SIZE, 0))
    exit (1);
  cur = "s";
  check (store_put (0, image) && store_put (1, image + STORE_BLOCK),
         "two blocks written");
  /* Another process's file for block 1, of other bytes. */
  memset (other, 'x', STORE_BLOCK);
  saved = store.served[1];
  check (store_put (1, other), "block 1 replaced");
  store.served[1] = saved;
  store_promote ();
  path (f, sizeof f, "s/%s/0.blk", store.shared_hex);
  check (access (f, F_OK) == 0, "block 0 is shared");
  path (f, sizeof f, "s/%s/1.blk", store.shared_hex);
  check (access (f, F_OK) == -1, "the replaced block 1 is not");
  check (same (0, 0, STORE_BLOCK), "block 0 is read from the shared folder");
  free (other);
}

static const struct {
  const char *name;
  void (*run) (void);
} cases[] = {
  { "written-and-read", written_and_read },
  { "other-object", other_object_refused },
  { "pieces", pieces },
  { "claims", claims },
  { "directories", directories },
  { "eviction", eviction },
  { "promote", promote },
};

int
main (void)
{
  unsigned i, j;
  int status;
  pid_t pid;

  if (mkdtemp (top) == NULL) {
    perror ("mkdtemp");
    return 1;
  }
  image = malloc (SIZE);
  for (i = 0; i < SIZE; i++)
    image[i] = (char) (i * 2654435761u >> 13);
  /* Each case in a child of its own, so that the store's state starts
   * fresh; damage runs after the first, in the same child.
   */
  for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    pid = fork ();
    if (pid == 0) {
      failures = 0;             /* this case's own */
      cases[i].run ();
      if (cases[i].run == written_and_read)
        damage_refused ();
      if (failures)
        stub_print_log ();
      _exit (failures ? 1 : 0);
    }
    if (pid == -1 || waitpid (pid, &status, 0) != pid ||
        !WIFEXITED (status) || WEXITSTATUS (status) != 0) {
      fprintf (stderr, "FAIL: test-store: case %s\n", cases[i].name);
      failures++;
    }
    else
      printf ("ok: %s\n", cases[i].name);
  }
  free (image);
  j = snprintf (NULL, 0, "rm -rf %s", top);
  {
    char cmd[j + 1];

    snprintf (cmd, sizeof cmd, "rm -rf %s", top);
    if (system (cmd) != 0)
      fprintf (stderr, "test-store: could not remove %s\n", top);
  }
  return failures ? 1 : 0;
}
