/* SPDX-License-Identifier: MIT */
/*
 * The hooks' state, shared by hooks.c (events: transitions in, hooks_fire()
 * out, webhooks) and exec.c (jobs and the runner thread that spawns them).
 *
 * Contract: h->lock guards the job queue, the pending events and the stop
 * flag; it is never held while a program runs or the engine is called.
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "providers/hooks/hooks.h"
#include "providers/hooks/webhook.h"

/* One program run for one event. */
struct job {
	struct job *next;
	char *path;
	char *name;       /* for the log */
	char *event;
	char *input;      /* event JSON and a newline */
	size_t input_len;
	char **env;
	uint64_t timeout_ms;
};

/* An event made of a transition, waiting for the runner to fire it. */
struct pending {
	struct pending *next;
	char event[64];
	json_t *fields;
};

struct hook_entry {
	char **events;
	size_t n_events;
	char *exec;
	uint64_t timeout_ms;
	struct webhook *webhook;     /* NULL for exec */
	char dest[WEBHOOK_DEST_MAX];
	const struct hooks *owner;
	bool journaled;              /* its grant and revocation events come with the journal's records */
};
struct hooks {
	struct mg_log log;
	struct engine *daemon;
	char *agent_id;
	char *dir;
	uint64_t dir_timeout_ms;
	unsigned max_running, max_queued;
	size_t output_max;
	struct hook_entry *entries;
	size_t n_entries;

	pthread_mutex_t lock;
	struct job *q_head, *q_tail;
	size_t n_queued;
	bool stopping;               /* runner: finish what is queued, then exit */
	int wake_fd;                 /* eventfd: a job or an event was queued, or stop began */
	/* one thread fires the pending events and runs the jobs, started at the
	 * first of them (hooks_runner_need_locked) and gone when none is left:
	 * an idle agent has none.  runner_started: a thread not joined yet;
	 * runner_left: it ended on its own (joined when the next starts) */
	bool runner_started, runner_left, subscribed;
	pthread_t runner;

	/* events made of the engine's transitions, for the runner to fire */
	struct pending *p_head, *p_tail;
	size_t n_pending;
};

/* ---- exec.c -------------------------------------------------------------------- */

/* A job running PATH for EVENT with TEXT on stdin; NULL on ENOMEM. */
struct job *hooks_job_new(const char *path, const char *name, const char *event, const char *text, json_t *ev,
			  uint64_t timeout_ms);
void hooks_job_free(struct job *j);
/* Queues J for the runner (dropped with a log line beyond max_queued). */
void hooks_enqueue(struct hooks *h, struct job *j);
/* Wakes the runner (a job was queued, or the stop began). */
void hooks_wake(struct hooks *h);
/* With H->lock held: starts the runner unless it runs or the stop began
 * (joining the one that left first); 0 or -errno (pthread_create). */
int hooks_runner_need_locked(struct hooks *h);

/* ---- hooks.c ------------------------------------------------------------------- */

/* The runner's: fires every pending event (queueing their jobs). */
void hooks_fire_pending(struct hooks *h);
/* The runner thread. */
void *hooks_runner_main(void *arg);
