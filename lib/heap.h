/* SPDX-License-Identifier: MIT */
/*
 * Freed heap given back to the kernel: after a big rendering, and by
 * running without glibc's per-thread caches.
 *
 * A report of thousands of blocks goes out as JSON built with jansson: tens
 * of thousands of small chunks, freed together once the text is written.
 * What lives on (a journal record, an event in the ring) is allocated among
 * them meanwhile, so the pages they leave free stay resident until
 * malloc_trim() hands them back, and RSS creeps up over grant+revocation
 * cycles (docs/performance.md, "RSS over cycles").
 *
 * malloc_trim() cannot hand back a chunk a thread's cache (tcache) holds:
 * up to 7 freed chunks of each small size per thread, the last ones an
 * operation freed, spread over the heap it used, each keeping its page.
 * Over 50 cycles of 4,096 blocks they kept 700 kB of pages the heap had
 * freed (docs/performance.md); memgrantd runs without them.
 */
#pragma once

#include <stddef.h>

/* A rendering this long (text bytes) freed thousands of chunks: about 1,500
 * blocks' entries.  Shorter ones leave too little to be worth a trim, which
 * walks the whole heap. */
#define HEAP_TRIM_RENDER_MIN (256u * 1024u)

/* After the tree of a rendering of TEXT_BYTES was freed: its pages back to
 * the kernel when it was big. */
void heap_trim_after_render(size_t text_bytes);

/* glibc reads its malloc tunables only from the environment at start. */
#define HEAP_TUNABLES_ENV "GLIBC_TUNABLES"
#define HEAP_TCACHE_TUNABLE "glibc.malloc.tcache_count"

/* Runs the program again (ARGV, the binary /proc/self/exe names) with
 * glibc's per-thread caches off, added to the environment's tunables, unless
 * the environment sets HEAP_TCACHE_TUNABLE already (the operator's choice,
 * or this was done).  Only when the file /proc/self/exe names is the one
 * running (-ESTALE: replaced since, or an emulator's), and not in secure
 * execution (-EPERM: AT_SECURE, where glibc drops the tunable).  Returns only when it
 * did not run it again: 0, or -errno, the environment as it was. */
int heap_without_thread_caches(char *const *argv);
