/* SPDX-License-Identifier: MIT */
/*
 * memgrant-host serve's view files (the status file, the metrics file):
 * rendered at most once per SERVE_VIEW_MS, or at the tick an event brings
 * (a phase, a grant, an unplug: what a reader of the events then looks
 * up), replaced whole only when the text changed, without fsync
 * (they are views of what the journal holds).
 * A host of 1,000 guests renders 1.6 MB of text for them: at every tick
 * (200 ms) that was most of serve's CPU, and a guest's figures change
 * somewhere at nearly every tick.
 */
#include "lib/fileio.h"
#include "lib/util.h"
#include "providers/host/serve/serve.h"

bool serve_view_due(struct serve_view *v, int64_t now)
{
	if (v->rendered && now < v->due)
		return false;
	v->rendered = true;
	v->due = now + SERVE_VIEW_MS;
	return true;
}

void serve_view_soon(struct serve_view *v)
{
	v->due = INT64_MIN;
}

int serve_view_put(struct serve_view *v, char *text)
{
	int r;

	if (!text)
		return -ENOMEM;
	if (v->last && streq(v->last, text)) {
		free(text);
		return 0;
	}
	r = file_write_view(v->path, text, strlen(text), 0644);
	if (r < 0) {
		free(text); /* tried again at the next rendering */
		return r;
	}
	free(v->last);
	v->last = text;
	v->writes++;
	return 1;
}

void serve_view_done(struct serve_view *v)
{
	free(v->last);
	v->last = NULL;
}
