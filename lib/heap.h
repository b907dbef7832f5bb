/* SPDX-License-Identifier: MIT */
/*
 * Freed heap given back to the kernel after a big rendering.
 *
 * A report of thousands of blocks goes out as JSON built with jansson: tens
 * of thousands of small chunks, freed together once the text is written.
 * What lives on (a journal record, an event in the ring) is allocated among
 * them meanwhile, so the pages they leave free stay resident until
 * malloc_trim() hands them back, and RSS creeps up over grant+revocation
 * cycles (docs/performance.md, "RSS over cycles").
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
