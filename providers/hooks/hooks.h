/* SPDX-License-Identifier: MIT */
/*
 * Hooks: tell the outside world what the agent did (docs/autoscaling.md).
 *
 * Contract:
 * - Events are named "kind.what": grant.accepted ... grant.rejected (and the
 *   same for revoke), block.failed, pressure.high, pressure.low,
 *   agent.started, agent.stopping.  hooks_start() subscribes to the
 *   engine's typed transitions (agent/engine/engine.h) and turns them into events:
 *   each (operation, state) fires once, and each block that reports an error
 *   fires block.failed once per operation.  Start the hooks before the
 *   engine to see what recovery does.  Other modules call hooks_fire().
 * - An event is one JSON object ({"type":"event","event":...,"event_id":...,
 *   "agent":...,"time":...} plus the event's fields).  Exec hooks get it on
 *   stdin and as MEMGRANT_* variables; webhooks get it in the durable outbox
 *   of their destination (providers/hooks/webhook.h delivers it).
 * - Exec hooks run with posix_spawn (never a shell) in their own process
 *   group, with a clean environment, cwd "/", default signal dispositions and
 *   an empty signal mask.  A hook that outlives its timeout is killed with
 *   SIGKILL (the whole group).  At most max_running run at once; up to
 *   max_queued wait; beyond that the run is dropped with a log line.  All of
 *   it happens on the hooks' own thread: hooks_fire() never waits for a
 *   program, so a hanging or crashing hook never holds up grants.
 * - The hooks directory is read at each event, run-parts style: regular,
 *   executable files whose names are only [A-Za-z0-9_-], in byte order.
 *   A missing directory is no hooks.
 * - Logs through the agent's log (what ran, how it ended, its output,
 *   bounded); returns 0 or -errno.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "lib/log.h"

#define HOOKS_DIR_DEFAULT SYSCONFDIR "/memgrant/hooks.d"
#define HOOKS_MAX_RUNNING_DEFAULT 4
#define HOOKS_MAX_QUEUED_DEFAULT 64
#define HOOKS_OUTPUT_MAX_DEFAULT 4096   /* bytes of a run's output that are logged */
#define HOOKS_DIR_TIMEOUT_DEFAULT 10000 /* ms, programs of the hooks directory */
#define HOOKS_STOP_GRACE_MS 10000       /* hooks_stop() kills what still runs after this */

struct engine;
struct hooks;

struct hooks_params {
	const struct mg_hook *hooks;  /* configured hooks (copied) */
	size_t n_hooks;
	const char *dir;              /* run-parts directory; NULL: none */
	uint64_t dir_timeout_ms;      /* 0: HOOKS_DIR_TIMEOUT_DEFAULT */
	unsigned max_running;         /* 0: HOOKS_MAX_RUNNING_DEFAULT */
	unsigned max_queued;          /* 0: HOOKS_MAX_QUEUED_DEFAULT */
	size_t output_max;            /* 0: HOOKS_OUTPUT_MAX_DEFAULT */
	const char *agent_id;         /* "agent" of every event */
	struct engine *daemon;        /* transitions to follow, outboxes for webhooks; NULL: hooks_fire() only */
	struct cred_store *creds;     /* how webhook secrets are read (lib/credstore.h); NULL: directly */
};

/* Checks and copies P; reads webhook secrets (-errno naming nothing: the
 * log says which file). */
int hooks_new(const struct hooks_params *p, const struct mg_log *log, struct hooks **out);
/* Follows the engine's transitions (with an engine) and starts one delivery
 * thread per webhook; the thread that fires events and runs hooks starts
 * with the first event. */
int hooks_start(struct hooks *h);
/* Fires EVENT with FIELDS (an object merged into the event; may be NULL;
 * copied, no reference taken), after the events already waiting: hooks
 * see events in the order they were fired.  0, or -errno when the event
 * could not be queued. */
int hooks_fire(struct hooks *h, const char *event, json_t *fields);
/* Stops following the engine (call it before engine_stop()), fires what is
 * pending, lets queued and running hooks finish (killing
 * what remains after HOOKS_STOP_GRACE_MS), stops webhook delivery (what is
 * undelivered stays in the outbox for the next start). */
void hooks_stop(struct hooks *h);
void hooks_free(struct hooks *h);

/* ---- pieces, exposed for tests ---------------------------------------------- */

/* PATTERN ("*", "grant.*", "grant.applied") matches EVENT. */
bool hooks_event_matches(const char *pattern, const char *event);
/* The run-parts list of DIR, sorted; -ENOENT when DIR is missing. */
int hooks_list_dir(const char *dir, char ***names, size_t *n);
void hooks_names_free(char **names, size_t n);
/* The event object (new reference) for EVENT with FIELDS merged in. */
json_t *hooks_event_json(const char *agent_id, const char *event, json_t *fields);
/* The environment of an exec hook for event EV: NULL-terminated, malloc'd. */
char **hooks_env(json_t *ev);
void hooks_env_free(char **env);

/* The hooks directory that goes with CONFIG_PATH: "hooks.d" next to it
 * (/etc/memgrant/memgrant.yaml -> /etc/memgrant/hooks.d).  malloc'd, NULL on ENOMEM. */
char *hooks_dir_for_config(const char *config_path);
/* Fires agent.started / agent.stopping with the agent's memory figures. */
void hooks_fire_agent(struct hooks *h, struct engine *d, const char *event);
