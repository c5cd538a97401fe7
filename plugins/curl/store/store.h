/* nbdkit-curl-plugin
 * Copyright the nbdkit-curl-plugin authors.
 * SPDX-License-Identifier: BSD-3-Clause (see COPYING)
 *
 * The store: the object's blocks on local disk, kept after nbdkit exits
 * (cache-dir=).  dir.c checks the directory and opens one object's
 * folder in it.  block.c writes and reads back one block file, with a
 * digest per chunk.  write.c writes blocks off the reader's path.
 * part.c assembles blocks that reads cover in pieces.  claim.c tells
 * other processes that a block is on its way.  evict.c keeps the
 * directory under cache-size= and the disk from filling.  It knows
 * nothing of HTTP or of the read chain: cache/cache.c gives it a key and
 * asks for blocks.  This folder uses the base only.
 *
 * On disk, DIR/HASH/ is one object: HASH is the SHA-256 of its key.
 * HASH/key holds the key as people may read it, HASH/first the digest
 * of the object's first bytes.  HASH/N.blk holds block N: a header of
 * STORE_HEADER bytes, then the block's bytes.  With checksum=, proven
 * blocks move to the folder of the digest alone (store_promote).  Files
 * are written under a name of their own and renamed into place, so a
 * reader sees a whole file or none.  Nothing here locks: several
 * processes, on one host or on several over NFS, may share DIR.
 */

#ifndef STORE_H
#define STORE_H

#include "base/base.h"

#define STORE_BLOCK (1024 * 1024)       /* bytes of the object a block holds */
#define STORE_HEADER 4096               /* a block file's header */
#define STORE_CHUNK (64 * 1024)         /* bytes under one digest */
#define STORE_CHUNKS (STORE_BLOCK / STORE_CHUNK)
#define STORE_KEY_HASH 32

/* What the store did, for -v at unload. */
struct store_counts {
  uint64_t hit_bytes;           /* served from disk */
  uint64_t written;             /* blocks written */
  uint64_t refused;             /* block files that failed a check */
  uint64_t waited;              /* blocks another process fetched */
  uint64_t evicted;             /* block files deleted to keep the bound */
};

/* The object's folder, and what is known of it (dir.c). */
struct store {
  int dirfd;                    /* DIR */
  int objfd;                    /* DIR/HASH, -1 when off */
  int sharedfd;                 /* checksum='s folder for all URLs, or -1 */
  unsigned char key_hash[STORE_KEY_HASH];  /* in every block's header */
  char hash_hex[2 * STORE_KEY_HASH + 1];   /* objfd's name */
  char shared_hex[2 * STORE_KEY_HASH + 1]; /* sharedfd's */
  uint64_t size;                /* the object's */
  uint64_t nblocks;
  uint64_t limit;               /* cache-size=, 0 for none */
  char host[64];                /* this host, for file names */
  /* Blocks known to be on disk: found at start, or written here. */
  pthread_mutex_t lock;
  unsigned char *present;       /* a bit per block */
  uint32_t *touched;            /* a hit's last mtime refresh, seconds */
  /* Each block's header digest as this process wrote it or served it
   * whole (0: neither): store_promote moves only those files.
   */
  uint64_t *served;
  bool no_writes;               /* writing failed for good */
  bool ephemeral;               /* objfd's blocks are of this run only */
  int64_t full_until_ns;        /* the disk was full: no writes until */
  struct store_counts counts;
};
extern struct store store;

/* dir.c */
extern int store_check_dir (const char *path);
extern bool store_open (const char *key, const char *shown,
                        const char *shared, uint64_t size, uint64_t limit);
extern void store_promote (void);
extern bool store_on (void);
extern bool store_has (uint64_t block);
extern uint64_t store_cached_from (uint64_t offset, uint64_t end);
extern void store_note_present (uint64_t block, bool present);
extern void store_tmp_name (char *name, size_t size, uint64_t block);
extern void store_drop_all (void);
extern void store_first (const unsigned char *digest, size_t len);
extern void store_close (void);

/* block.c */
extern uint32_t store_block_len (uint64_t block);
extern uint32_t store_chunks (uint32_t off, uint32_t len);
extern int store_get (uint64_t block, char *buf, uint32_t off, uint32_t len,
                      uint32_t *bad);
extern bool store_write_block (uint64_t block, const char *data);
extern bool store_finish (int fd, const char *tmp, uint64_t block,
                          const char *data);
extern bool store_may_write (void);

/* write.c: blocks written by a thread of their own. */
extern bool store_put (uint64_t block, const char *data);
extern void store_write_start (void);
extern void store_write_flush (void);
extern void store_write_stop (void);

/* part.c */
extern void store_part (uint64_t block, uint32_t off, const char *data,
                        uint32_t len);
extern void store_part_drop (uint64_t block);
extern void store_part_unload (void);

/* claim.c: a block on its way, from this process or another. */
enum store_claim { CLAIM_MINE, CLAIM_OTHERS, CLAIM_NONE };
extern enum store_claim store_claim (uint64_t block);
extern bool store_claimed_file (uint64_t block, int *fd, char *tmp,
                                size_t size);
extern void store_unclaim (uint64_t block);
extern bool store_claimed (uint64_t block);

/* evict.c */
extern void store_evict_start (void);
extern void store_wrote (uint64_t bytes);
extern bool store_space_low (void);
extern void store_evict_stop (void);

#endif /* STORE_H */
