/* SPDX-License-Identifier: MIT */
/* Opens a shared library and resolves a table of its functions (dl_table.h). */
#include "lib/dl_table.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>

int dl_table_open(const char *soname, const char *const *names, void **fns, size_t n, char *why, size_t whylen)
{
	void *h;
	const char *e;

	/* RTLD_LOCAL: nothing of it serves symbol lookups of other libraries;
	 * RTLD_NOW: a missing function shows here, not at its first call */
	h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		e = dlerror();
		snprintf(why, whylen, "cannot load %s: %s", soname, e ? e : "unknown error");
		return -ELIBACC;
	}
	for (size_t i = 0; i < n; i++) {
		dlerror();
		fns[i] = dlsym(h, names[i]);
		if (!fns[i]) {
			e = dlerror();
			snprintf(why, whylen, "%s has no %s (too old a version?): %s", soname, names[i],
				 e ? e : "symbol is NULL");
			dlclose(h);
			return -ELIBACC;
		}
	}
	return 0; /* the handle stays open for the life of the process */
}
