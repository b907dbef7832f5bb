/* SPDX-License-Identifier: MIT */
#include "lib/heap.h"

#include <malloc.h>

void heap_trim_after_render(size_t text_bytes)
{
	if (text_bytes >= HEAP_TRIM_RENDER_MIN)
		malloc_trim(0);
}
